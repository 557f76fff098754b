package pavedroad

import (
	_ "embed"
	"go/ast"
	"go/types"
	"regexp"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

//go:embed doc.go
var doc string

// Analyzer reports raw etcd and Redis locking outside the SDK.
var Analyzer = vetutil.NewCheck("pavedroad", doc, "pavedroad", run)

const (
	etcdConcurrency = "go.etcd.io/etcd/client/v3/concurrency"
	redsync         = "github.com/go-redsync/redsync"
	fixLease        = "use correctnesslease (fenced) or efficiencylock (declared)"
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
	r := vetutil.NewReporter(pass, "pavedroad")
	if vetutil.IsSDK(pass.Pkg.Path()) {
		return r.Finish(), nil
	}
	checkRedsync(pass, r)
	for _, f := range r.Files() {
		if r.IsTestFile(f.FileStart) {
			continue
		}
		for _, decl := range f.Decls {
			ast.Inspect(decl, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					checkCall(pass, r, decl, n)
				case *ast.CompositeLit:
					checkSetArgs(pass, r, n)
				}
				return true
			})
		}
	}
	return r.Finish(), nil
}

func checkCall(pass *analysis.Pass, r *vetutil.Reporter, decl ast.Decl, call *ast.CallExpr) {
	fn := vetutil.Callee(pass.TypesInfo, call)
	if fn == nil {
		return
	}
	pkg := vetutil.FuncPkg(fn)
	switch {
	case pkg == etcdConcurrency:
		switch fn.Name() {
		case "NewMutex", "NewLocker", "NewElection":
			r.Report(vetutil.Finding{Pos: call.Pos(), End: call.End(), What: "concurrency." + fn.Name() + " grants authority without a fencing token", Fix: fixLease})
		}
	case isRedisPkg(pkg):
		switch fn.Name() {
		case "SetNX":
			if len(call.Args) > 1 && dedupeMarker(pass, decl, call.Args[1]) {
				return // a "seen:<id>" marker set once and never released is not a lock
			}
			r.Report(vetutil.Finding{Pos: call.Pos(), End: call.End(), What: "Redis SetNX used as a lock", Fix: fixLease})
		case "Do":
			if doSetNX(pass.TypesInfo, call.Args) {
				r.Report(vetutil.Finding{Pos: call.Pos(), End: call.End(), What: "Redis SET … NX sent through Do, used as a lock", Fix: fixLease})
			}
		case "Eval", "EvalRO", "EvalSha", "EvalShaRO", "ScriptLoad", "NewScript":
			for _, a := range call.Args {
				if s, ok := vetutil.ConstString(pass.TypesInfo, a); ok && setNXScript.MatchString(s) {
					r.Report(vetutil.Finding{Pos: call.Pos(), End: call.End(), What: "Lua script with SET … NX, used as a lock", Fix: fixLease})
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
				r.Report(vetutil.Finding{Pos: lit.Pos(), End: lit.End(), What: "Redis SET with Mode NX used as a lock", Fix: fixLease})
			}
		}
	}
}

// markerPrefixes start the keys of dedupe markers: SetNX answers "first time?"
// and the key is never deleted, so nothing is held.
var markerPrefixes = []string{"seen", "dedup", "dedupe", "processed", "handled", "idem", "idempotency", "once", "done", "consumed", "delivered"}

// dedupeMarker reports whether a SetNX key is a dedupe marker: its constant
// prefix names one (seen:, dedupe:, processed:, …) and the function never
// deletes it (a lock is released; a marker expires).
func dedupeMarker(pass *analysis.Pass, decl ast.Decl, key ast.Expr) bool {
	prefix := constPrefix(pass.TypesInfo, key)
	marker := false
	for _, m := range markerPrefixes {
		if rest, ok := strings.CutPrefix(strings.ToLower(prefix), m); ok && rest != "" && strings.ContainsRune(":-_/.{", rune(rest[0])) {
			marker = true
		}
	}
	if !marker {
		return false
	}
	keyText := types.ExprString(key)
	deleted := false
	ast.Inspect(decl, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || deleted {
			return !deleted
		}
		fn := vetutil.Callee(pass.TypesInfo, call)
		if fn == nil || !isRedisPkg(vetutil.FuncPkg(fn)) {
			return true
		}
		switch fn.Name() {
		case "Del", "Unlink", "Eval", "EvalSha", "Expire", "PExpire":
			for _, a := range call.Args {
				if strings.Contains(types.ExprString(a), keyText) {
					deleted = true
				}
			}
		}
		return true
	})
	return !deleted
}

// constPrefix returns the constant text a key expression starts with:
// "seen:" + id, fmt.Sprintf("seen:%s", id), or a constant.
func constPrefix(info *types.Info, e ast.Expr) string {
	e = ast.Unparen(e)
	if s, ok := vetutil.ConstString(info, e); ok {
		return s
	}
	switch e := e.(type) {
	case *ast.BinaryExpr:
		return constPrefix(info, e.X)
	case *ast.CallExpr:
		if fn := vetutil.Callee(info, e); fn != nil && vetutil.FuncPkg(fn) == "fmt" && fn.Name() == "Sprintf" && len(e.Args) > 0 {
			s, _ := vetutil.ConstString(info, e.Args[0])
			if i := strings.Index(s, "%"); i >= 0 {
				s = s[:i]
			}
			return s
		}
	}
	return ""
}

func isRedsync(path string) bool { return path == redsync || strings.HasPrefix(path, redsync+"/") }

// checkRedsync reports redsync where it is used, on the line to change: every
// mutex made (NewMutex); in a package that makes none, the first reference to
// the package in each file (redsync.New, a type). An import alone is not
// reported: the line that takes the lock is the one a reviewer should see.
func checkRedsync(pass *analysis.Pass, r *vetutil.Reporter) {
	var mutexes []*ast.CallExpr
	firstRef := map[*ast.File]*ast.SelectorExpr{}
	for _, f := range r.Files() {
		if r.IsTestFile(f.FileStart) {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if fn := vetutil.Callee(pass.TypesInfo, n); fn != nil && isRedsync(vetutil.FuncPkg(fn)) && fn.Name() == "NewMutex" {
					mutexes = append(mutexes, n)
				}
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && firstRef[f] == nil {
					if pn, ok := pass.TypesInfo.Uses[id].(*types.PkgName); ok && isRedsync(pn.Imported().Path()) {
						firstRef[f] = n
					}
				}
			}
			return true
		})
	}
	for _, call := range mutexes {
		r.Report(vetutil.Finding{Pos: call.Pos(), End: call.End(), What: "a redsync mutex, a Redis lock without fencing tokens", Fix: fixLease})
	}
	if len(mutexes) > 0 {
		return
	}
	for _, f := range r.Files() {
		if sel := firstRef[f]; sel != nil {
			r.Report(vetutil.Finding{Pos: sel.Pos(), End: sel.End(), What: "redsync, a Redis lock without fencing tokens", Fix: fixLease})
		}
	}
}
