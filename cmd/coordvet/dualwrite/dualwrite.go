package dualwrite

import (
	_ "embed"
	"fmt"
	"go/ast"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

//go:embed doc.go
var doc string

// Config extends the built-in lists. Entries are "importpath:Name" or
// "importpath:Type.Name".
type Config struct {
	// Brokers are extra publish calls. Default: none beyond the built-in list.
	Brokers []string
	// Commits are extra transaction commits. Default: none beyond the built-in list.
	Commits []string
}

// New returns a dualwrite analyzer with the built-in lists plus cfg's entries,
// and the -brokers and -commits flags to add more. It fails on a malformed entry.
func New(cfg Config) (*analysis.Analyzer, error) {
	s := &settings{}
	if err := s.commits.Set(strings.Join(append(defaultCommits(), cfg.Commits...), ",")); err != nil {
		return nil, err
	}
	if err := s.brokers.Set(strings.Join(append(defaultBrokers(), cfg.Brokers...), ",")); err != nil {
		return nil, err
	}
	a := &analysis.Analyzer{
		Name: "dualwrite",
		Doc:  vetutil.Doc(doc, "dualwrite"),
		URL:  vetutil.DocURL + "#dualwrite",
		Run:  func(pass *analysis.Pass) (any, error) { return run(pass, s) },
	}
	a.Flags.Var(&s.brokers, "brokers", "extra broker publish calls, comma-separated importpath:Name or importpath:Type.Name")
	a.Flags.Var(&s.commits, "commits", "extra transaction commit calls, comma-separated importpath:Name or importpath:Type.Name")
	return a, nil
}

// Analyzer is the dualwrite analyzer with the built-in lists.
var Analyzer = mustNew(Config{})

func mustNew(cfg Config) *analysis.Analyzer {
	a, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return a
}

type settings struct {
	brokers, commits listFlag
}

const (
	outboxPkg = vetutil.SDK + "/outbox"
	rule      = "RFC MUST 2 (events are written to an outbox in the same transaction and published by a relay; dual writes are prohibited)"
	fix       = "write the event in the same transaction with (*outbox.Outbox).EnqueueTx(ctx, tx, event) and let the outbox relay publish it"
)

func run(pass *analysis.Pass, s *settings) (any, error) {
	if vetutil.UnderPackage(pass.Pkg.Path(), outboxPkg) {
		return nil, nil
	}
	r := vetutil.NewReporter(pass, "dualwrite")
	for _, f := range r.Files() {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				checkUnit(pass, r, s, d, d.Name.Name)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					if vs, ok := spec.(*ast.ValueSpec); ok {
						checkUnit(pass, r, s, vs, "a package-level function literal")
					}
				}
			}
		}
	}
	r.Finish()
	return nil, nil
}

type hit struct {
	call *ast.CallExpr
	fn   *types.Func
}

// describe names the called function as the user wrote it: pkg.Type.Method.
func (h *hit) describe() string {
	name := h.fn.Name()
	if recv := vetutil.RecvName(h.fn); recv != "" {
		name = recv + "." + name
	}
	return h.fn.Pkg().Name() + "." + name
}

// checkUnit reports the first publish in a unit (closures included) that also
// commits a transaction.
func checkUnit(pass *analysis.Pass, r *vetutil.Reporter, s *settings, unit ast.Node, name string) {
	var commit, publish *hit
	ast.Inspect(unit, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		fn := vetutil.Callee(pass.TypesInfo, call)
		if fn == nil {
			return true
		}
		if commit == nil {
			if match(s.commits.targets, fn) {
				commit = &hit{call, fn}
			}
		}
		if publish == nil {
			if match(s.brokers.targets, fn) {
				publish = &hit{call, fn}
			}
		}
		return true
	})
	if commit == nil || publish == nil {
		return
	}
	line := pass.Fset.Position(commit.call.Pos()).Line
	r.Report(vetutil.Finding{
		Pos:  publish.call.Pos(),
		What: fmt.Sprintf("%s commits a transaction (%s, line %d) and publishes to a broker (%s): a crash between the two loses or invents the event", name, commit.describe(), line, publish.describe()),
		Rule: rule,
		Fix:  fix,
	})
}

func match(targets []target, fn *types.Func) bool {
	for _, t := range targets {
		if t.matches(fn) {
			return true
		}
	}
	return false
}
