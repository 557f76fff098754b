package pavedroad

import (
	_ "embed"
	"go/ast"
	"go/types"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

//go:embed doc.go
var doc string

// Analyzer reports raw etcd and Redis locking outside the SDK.
var Analyzer = &analysis.Analyzer{
	Name: "pavedroad",
	Doc:  vetutil.Doc(doc, "pavedroad"),
	URL:  vetutil.DocURL + "#pavedroad",
	Run:  run,
}

const (
	etcdConcurrency = "go.etcd.io/etcd/client/v3/concurrency"
	redsync         = "github.com/go-redsync/redsync"
	rule3           = "RFC MUST 3 (correctness leases carry a fencing token) and MUST 4 (Redis locks only where duplicates are harmless, declared)"
	fixLease        = "use correctnesslease.Acquire/Run and pass Lease.Token() to the resource, or efficiencylock.New with efficiencylock.DuplicatesHarmless(\"why\") when duplicates are harmless"
)

// redisPkgs are the go-redis import paths.
func isRedisPkg(path string) bool {
	switch path {
	case "github.com/redis/go-redis/v9", "github.com/go-redis/redis/v8", "github.com/go-redis/redis/v7", "github.com/go-redis/redis":
		return true
	}
	return false
}

// setNXScript matches a Lua redis.call/pcall of SET with an NX argument.
var setNXScript = regexp.MustCompile(`(?is)['"]set['"][^)]*['"]nx['"]`)

func run(pass *analysis.Pass) (any, error) {
	if vetutil.IsSDK(pass.Pkg.Path()) {
		return nil, nil
	}
	r := vetutil.NewReporter(pass, "pavedroad")
	for _, f := range r.Files() {
		if r.IsTestFile(f.FileStart) {
			continue
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if path == redsync || strings.HasPrefix(path, redsync+"/") {
				r.Report(vetutil.Finding{Pos: imp.Pos(), What: "import of redsync, a Redis lock without fencing tokens", Rule: rule3, Fix: fixLease})
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				checkCall(pass, r, n)
			case *ast.CompositeLit:
				checkSetArgs(pass, r, n)
			}
			return true
		})
	}
	r.Finish()
	return nil, nil
}

func checkCall(pass *analysis.Pass, r *vetutil.Reporter, call *ast.CallExpr) {
	fn := vetutil.Callee(pass.TypesInfo, call)
	if fn == nil {
		return
	}
	pkg := vetutil.FuncPkg(fn)
	switch {
	case pkg == etcdConcurrency:
		switch fn.Name() {
		case "NewMutex", "NewLocker", "NewElection":
			r.Report(vetutil.Finding{Pos: call.Pos(), What: "concurrency." + fn.Name() + " grants authority without a fencing token", Rule: rule3, Fix: fixLease})
		}
	case isRedisPkg(pkg):
		switch fn.Name() {
		case "SetNX":
			r.Report(vetutil.Finding{Pos: call.Pos(), What: "Redis SetNX used as a lock", Rule: rule3, Fix: fixLease})
		case "Do":
			if doSetNX(pass.TypesInfo, call.Args) {
				r.Report(vetutil.Finding{Pos: call.Pos(), What: "Redis SET … NX sent through Do, used as a lock", Rule: rule3, Fix: fixLease})
			}
		case "Eval", "EvalRO", "EvalSha", "EvalShaRO", "ScriptLoad", "NewScript":
			for _, a := range call.Args {
				if s, ok := vetutil.ConstString(pass.TypesInfo, a); ok && setNXScript.MatchString(s) {
					r.Report(vetutil.Finding{Pos: call.Pos(), What: "Lua script with SET … NX, used as a lock", Rule: rule3, Fix: fixLease})
					return
				}
			}
		}
	}
}

// doSetNX reports whether Do's arguments spell SET with an NX option, all
// checked as constants.
func doSetNX(info *types.Info, args []ast.Expr) bool {
	set, nx := false, false
	for _, a := range args {
		s, ok := vetutil.ConstString(info, a)
		if !ok {
			continue
		}
		switch {
		case strings.EqualFold(s, "set") && !set:
			set = true
		case strings.EqualFold(s, "nx") && set:
			nx = true
		}
	}
	return set && nx
}

// checkSetArgs reports redis.SetArgs{Mode: "NX"}.
func checkSetArgs(pass *analysis.Pass, r *vetutil.Reporter, lit *ast.CompositeLit) {
	t := pass.TypesInfo.TypeOf(lit)
	n, ok := types.Unalias(t).(*types.Named)
	if !ok || n.Obj().Name() != "SetArgs" || n.Obj().Pkg() == nil || !isRedisPkg(n.Obj().Pkg().Path()) {
		return
	}
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Mode" {
			if s, ok := vetutil.ConstString(pass.TypesInfo, kv.Value); ok && strings.EqualFold(s, "nx") {
				r.Report(vetutil.Finding{Pos: lit.Pos(), What: "Redis SET with Mode NX used as a lock", Rule: rule3, Fix: fixLease})
			}
		}
	}
}
