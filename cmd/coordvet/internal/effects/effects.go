// Package effects computes what each function does that the coordvet checks
// care about — commits a transaction, writes outside one, begins one,
// publishes to a broker, runs a function argument inside a transaction, lets a
// fencing token reach a write — and exports it as an analysis fact, so dualwrite
// and fencetoken see through helpers, across packages and through interfaces.
//
// A unit is a function declaration, or a function literal that is not part of
// one: a literal called where it stands (directly, through a local variable,
// by defer or go), passed as the transaction callback of a call in Table, of a
// helper whose fact says so, or to errgroup/sync "run it now" helpers joins the
// enclosing unit; any other literal (an HTTP handler, a callback for later) is
// a unit of its own.
package effects

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/token"
	"go/types"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

// Fact is what a function (or an interface method, resolved through the
// dynamic types of its package) does. Strings say how, for messages; "" means
// it does not.
type Fact struct {
	Commit  string // commits a transaction or writes outside one
	Publish string // publishes to a broker
	Begin   string // begins a transaction (or joins the caller's)
	// TxParams are the indexes of function parameters run inside a transaction.
	TxParams []int
	// TokenParams are the indexes of token or token-holder parameters whose
	// token reaches a write (a fence, a query argument, a header, a store).
	TokenParams []int
	// ReturnParams are those whose token flows into a result: the caller
	// follows the result.
	ReturnParams []int
	// HasTokenParams is true when the function has token or token-holder
	// parameters, so TokenParams is known (empty: none reaches a write).
	HasTokenParams bool
}

// AFact marks Fact as an analysis fact.
func (*Fact) AFact() {}

// Relevant is the package fact of a package that can commit, publish or hold
// a token: it imports the SDK, a package of the table, or a relevant package.
// A package that is not relevant is skipped whole, which keeps the cost of the
// facts over a large dependency graph (etcd, grpc, otel) near zero.
type Relevant struct{}

// AFact marks Relevant as an analysis fact.
func (*Relevant) AFact() {}

func (*Relevant) String() string { return "relevant" }

func (f *Fact) String() string {
	return fmt.Sprintf("effects(commit=%q publish=%q begin=%q tx=%v tokens=%v)", f.Commit, f.Publish, f.Begin, f.TxParams, f.TokenParams)
}

func (f *Fact) empty() bool {
	return f.Commit == "" && f.Publish == "" && f.Begin == "" && len(f.TxParams) == 0 && !f.HasTokenParams
}

// same compares what a fixpoint iteration may change.
func (f *Fact) same(g *Fact) bool {
	return f.Commit == g.Commit && f.Publish == g.Publish && f.Begin == g.Begin &&
		slices.Equal(f.TxParams, g.TxParams) && slices.Equal(f.TokenParams, g.TokenParams) && slices.Equal(f.ReturnParams, g.ReturnParams)
}

// New returns the effects analyzer over table. Every analyzer of one run
// must share one instance (its fact type is unique to it).
func New(table *Table) *analysis.Analyzer {
	return &analysis.Analyzer{
		Name:       "coordveteffects",
		Doc:        "compute commits, publishes, transaction callbacks and token use per function, as facts (no diagnostics of its own)",
		URL:        vetutil.DocURL + "#what-counts",
		Requires:   []*analysis.Analyzer{vetutil.Exceptions},
		FactTypes:  []analysis.Fact{new(Fact), new(Relevant)},
		ResultType: reflect.TypeOf((*Result)(nil)),
		Run:        func(pass *analysis.Pass) (any, error) { return run(pass, table) },
	}
}

// Site is one effect in a unit: the call in the unit that causes it.
type Site struct {
	Call *ast.CallExpr
	// What names the call and, for a helper, what it reaches:
	// "pgx.Tx.Commit", "saveOrder → pgx.Tx.Commit".
	What string
}

// Unit is a function declaration or a function literal of its own, with its
// effects.
type Unit struct {
	Node     ast.Node // *ast.FuncDecl or *ast.FuncLit
	Name     string   // the function's name, or "the function literal at line N"
	Commits  []Site   // commits and autocommitted writes
	Publish  []Site
	Begins   []Site
	Excepted map[*ast.CallExpr]bool // publishes silenced by a dualwrite exception

	fn       *types.Func // for a declaration
	calls    []*callEv
	children []*Unit            // the literals directly inside
	params   map[*types.Var]int // its own func-typed parameters, by index
	parent   *Unit
	// joined is set when the literal is part of its parent's unit.
	joined bool
}

// declParam returns the index of v among the func-typed parameters of the
// declaration u lies in (u itself, or the function around its literal), or -1:
// a repository's callback called from inside its own BeginFunc literal is
// still the declaration's parameter.
func (u *Unit) declParam(v *types.Var) int {
	top := u
	for top.parent != nil {
		top = top.parent
	}
	if i, ok := top.params[v]; ok {
		return i
	}
	return -1
}

// Result is the effects of one package.
type Result struct {
	// Units are the package's units in source order: declarations, then the
	// literals of their own inside them.
	Units []*Unit
	a     *analyzer
}

// Unit returns the unit of a declaration or literal node, or nil.
func (r *Result) Unit(n ast.Node) *Unit { return r.a.byNode[n] }

// FactOf returns what fn does (a function of this package or, through facts,
// of another), or nil if nothing is known.
func (r *Result) FactOf(fn *types.Func) *Fact { return r.a.factOf(fn) }

// Table returns the table the analysis used.
func (r *Result) Table() *Table { return r.a.table }

type callEv struct {
	call     *ast.CallExpr
	callee   *types.Func
	lit      *Unit // a literal called where it stands, or through a local variable
	param    int   // index of the unit's func-typed parameter called, or -1
	argLits  map[int]*Unit
	argFuncs map[int]*types.Func
	argParam map[int]int // argument index -> the unit's func-typed parameter passed on
}

type analyzer struct {
	pass     *analysis.Pass
	table    *Table
	facts    map[*types.Func]*Fact // this package's, during the fixpoint
	order    []*Unit               // the declarations with a function object, in source order
	byNode   map[ast.Node]*Unit
	units    []*Unit
	ifaceKey map[*types.Func]map[Kind]string // resolved interface methods, per round
	named    []*types.Named                  // concrete named types of this package, for dynamic types
	brokers  []*types.Named                  // named, plus the broker clients of imported packages
	excepted []*vetutil.Exception
}

var goroot = filepath.Clean(build.Default.GOROOT)

func run(pass *analysis.Pass, table *Table) (any, error) {
	a := &analyzer{pass: pass, table: table, facts: map[*types.Func]*Fact{}, byNode: map[ast.Node]*Unit{}}
	res := &Result{a: a}
	if isStdlib(pass) || !a.relevant() {
		return res, nil // nothing here commits, publishes or holds a token
	}
	pass.ExportPackageFact(new(Relevant))
	if set, ok := pass.ResultOf[vetutil.Exceptions].(*vetutil.ExceptionSet); ok {
		a.excepted = set.Valid("dualwrite")
	}
	for _, f := range pass.Files {
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			fn, _ := pass.TypesInfo.Defs[fd.Name].(*types.Func)
			u := a.newUnit(fd, fd.Name.Name, fn, fd.Type, fd.Body, nil)
			if fn != nil {
				a.order = append(a.order, u)
			}
		}
		// Function literals at package level (var handler = func(...) {...}).
		for _, decl := range f.Decls {
			if gd, ok := decl.(*ast.GenDecl); ok {
				ast.Inspect(gd, func(n ast.Node) bool {
					if lit, ok := n.(*ast.FuncLit); ok {
						a.newUnit(lit, "the function literal at line "+fmt.Sprint(pass.Fset.Position(lit.Pos()).Line), nil, lit.Type, lit.Body, nil)
						return false
					}
					return true
				})
			}
		}
	}
	for _, obj := range pass.TypesInfo.Defs {
		if tn, ok := obj.(*types.TypeName); ok && !tn.IsAlias() {
			if n, ok := tn.Type().(*types.Named); ok && !types.IsInterface(n) {
				a.named = append(a.named, n)
			}
		}
	}
	slices.SortFunc(a.named, func(x, y *types.Named) int { return int(x.Obj().Pos() - y.Obj().Pos()) })
	a.fixpoint()
	a.finish()
	res.Units = a.units
	a.exportFacts()
	return res, nil
}

// relevant reports whether the package imports the SDK, a package of the
// table, or a package that is itself relevant.
func (a *analyzer) relevant() bool {
	if vetutil.IsSDK(a.pass.Pkg.Path()) || a.table.known(a.pass.Pkg.Path()) {
		return true
	}
	for _, imp := range a.pass.Pkg.Imports() {
		if vetutil.IsSDK(imp.Path()) || a.table.known(imp.Path()) || a.pass.ImportPackageFact(imp, new(Relevant)) {
			return true
		}
	}
	return false
}

// inGoroot reports whether pos lies in the standard library (GOROOT, which
// export data may spell "$GOROOT").
func (a *analyzer) inGoroot(pos token.Pos) bool {
	f := a.pass.Fset.File(pos)
	if f == nil {
		return false
	}
	name := filepath.Clean(f.Name())
	return strings.HasPrefix(name, goroot+string(filepath.Separator)) || strings.HasPrefix(f.Name(), "$GOROOT/")
}

func isStdlib(pass *analysis.Pass) bool {
	if len(pass.Files) == 0 {
		return true
	}
	name := pass.Fset.File(pass.Files[0].FileStart).Name()
	return strings.HasPrefix(filepath.Clean(name), goroot+string(filepath.Separator))
}

// newUnit records a unit and the calls in it; literals inside become child
// units, joined or not after the fixpoint.
func (a *analyzer) newUnit(node ast.Node, name string, fn *types.Func, ft *ast.FuncType, body *ast.BlockStmt, parent *Unit) *Unit {
	u := &Unit{Node: node, Name: name, fn: fn, parent: parent, params: map[*types.Var]int{}, Excepted: map[*ast.CallExpr]bool{}}
	if parent != nil {
		parent.children = append(parent.children, u)
	}
	a.byNode[node] = u
	a.units = append(a.units, u)
	info := a.pass.TypesInfo
	i := 0
	for _, field := range ft.Params.List {
		names := field.Names
		if len(names) == 0 {
			i++
			continue
		}
		for _, n := range names {
			if v, ok := info.Defs[n].(*types.Var); ok {
				if _, isFunc := v.Type().Underlying().(*types.Signature); isFunc {
					u.params[v] = i
				}
			}
			i++
		}
	}
	locals := map[*types.Var]*Unit{} // local variables bound to a literal
	litOf := func(e ast.Expr) *Unit {
		switch e := ast.Unparen(e).(type) {
		case *ast.FuncLit:
			return a.byNode[e]
		case *ast.Ident:
			if v, ok := info.Uses[e].(*types.Var); ok {
				return locals[v]
			}
		}
		return nil
	}
	var walk func(n ast.Node) bool
	walk = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			if a.byNode[n] == nil {
				a.newUnit(n, "the function literal at line "+fmt.Sprint(a.pass.Fset.Position(n.Pos()).Line), nil, n.Type, n.Body, u)
			}
			return false
		case *ast.AssignStmt:
			for i, rhs := range n.Rhs {
				if lit, ok := ast.Unparen(rhs).(*ast.FuncLit); ok && len(n.Lhs) == len(n.Rhs) {
					ast.Inspect(lit, walk)
					if id, ok := n.Lhs[i].(*ast.Ident); ok {
						if v, ok := objOf(info, id).(*types.Var); ok {
							locals[v] = a.byNode[lit]
						}
					}
				}
			}
		case *ast.ValueSpec:
			for i, val := range n.Values {
				if lit, ok := ast.Unparen(val).(*ast.FuncLit); ok && i < len(n.Names) {
					ast.Inspect(lit, walk)
					if v, ok := info.Defs[n.Names[i]].(*types.Var); ok {
						locals[v] = a.byNode[lit]
					}
				}
			}
		case *ast.CallExpr:
			ev := &callEv{call: n, callee: vetutil.Callee(info, n), param: -1}
			// Arguments and the callee first, so literals exist when we record them.
			for _, arg := range n.Args {
				ast.Inspect(arg, walk)
			}
			ast.Inspect(n.Fun, walk)
			ev.lit = litOf(n.Fun)
			if ev.lit == nil {
				if id, ok := ast.Unparen(n.Fun).(*ast.Ident); ok {
					if v, ok := info.Uses[id].(*types.Var); ok {
						ev.param = u.declParam(v)
					}
				}
			}
			for i, arg := range n.Args {
				if l := litOf(arg); l != nil {
					if ev.argLits == nil {
						ev.argLits = map[int]*Unit{}
					}
					ev.argLits[i] = l
					continue
				}
				if fn := vetutil.FuncRef(info, arg); fn != nil {
					if ev.argFuncs == nil {
						ev.argFuncs = map[int]*types.Func{}
					}
					ev.argFuncs[i] = fn
					continue
				}
				if id, ok := ast.Unparen(arg).(*ast.Ident); ok {
					if v, ok := info.Uses[id].(*types.Var); ok {
						if pi := u.declParam(v); pi >= 0 {
							if ev.argParam == nil {
								ev.argParam = map[int]int{}
							}
							ev.argParam[i] = pi
						}
					}
				}
			}
			u.calls = append(u.calls, ev)
			return false
		}
		return true
	}
	ast.Inspect(body, walk)
	return u
}

func objOf(info *types.Info, id *ast.Ident) types.Object {
	if o := info.Defs[id]; o != nil {
		return o
	}
	return info.Uses[id]
}

// effects is what evaluating a unit found.
type effects struct {
	commits, publishes, begins []Site
	joined                     []*Unit
	callsParams                map[int]bool
	txParams                   map[int]bool
}

func (a *analyzer) fixpoint() {
	for round := 0; round < 12; round++ {
		a.ifaceKey = map[*types.Func]map[Kind]string{}
		changed := false
		for _, u := range a.order { // source order: the same facts, and words, on every run
			f := a.factFromUnit(u)
			tok := a.tokenParams(u)
			f.TokenParams, f.ReturnParams, f.HasTokenParams = tok.consumed, tok.returned, tok.has
			if old := a.facts[u.fn]; old == nil || !old.same(f) {
				a.facts[u.fn] = f
				changed = true
			}
		}
		if !changed {
			return
		}
	}
}

func (a *analyzer) factFromUnit(u *Unit) *Fact {
	e := a.eval(u, map[*Unit]bool{})
	f := &Fact{}
	first := func(sites []Site, skipExcepted bool) string {
		for _, s := range sites {
			if skipExcepted && a.isExcepted(s.Call) {
				continue
			}
			return u.Name + " → " + s.What
		}
		return ""
	}
	f.Commit = first(e.commits, false)
	if !vetutil.UnderPackage(a.pass.Pkg.Path(), vetutil.SDK+"/outbox") { // the relay is the sanctioned publisher
		f.Publish = first(e.publishes, true)
	}
	f.Begin = first(e.begins, false)
	for i := range e.txParams {
		f.TxParams = append(f.TxParams, i)
	}
	if len(e.commits) > 0 || len(e.begins) > 0 {
		for i := range e.callsParams {
			if !slices.Contains(f.TxParams, i) {
				f.TxParams = append(f.TxParams, i)
			}
		}
	}
	slices.Sort(f.TxParams)
	f.Commit, f.Publish, f.Begin = chain(f.Commit), chain(f.Publish), chain(f.Begin)
	return f
}

// chain keeps a helper chain short: the first helper and the final call.
func chain(s string) string {
	parts := strings.Split(s, " → ")
	if len(parts) <= 3 {
		return s
	}
	return parts[0] + " → … → " + parts[len(parts)-1]
}

func (a *analyzer) isExcepted(call *ast.CallExpr) bool {
	p := a.pass.Fset.Position(call.Pos())
	for _, e := range a.excepted {
		if e.Covers(p.Filename, p.Line) {
			return true
		}
	}
	return false
}

// eval computes the effects of a unit and of the literals joined to it.
func (a *analyzer) eval(u *Unit, seen map[*Unit]bool) effects {
	var e effects
	e.callsParams, e.txParams = map[int]bool{}, map[int]bool{}
	if seen[u] {
		return e
	}
	seen[u] = true
	join := func(l *Unit) {
		if l == nil || seen[l] {
			return
		}
		e.joined = append(e.joined, l)
		sub := a.eval(l, seen)
		e.commits = append(e.commits, sub.commits...)
		e.publishes = append(e.publishes, sub.publishes...)
		e.begins = append(e.begins, sub.begins...)
		e.joined = append(e.joined, sub.joined...)
		for i := range sub.callsParams {
			e.callsParams[i] = true
		}
		for i := range sub.txParams {
			e.txParams[i] = true
		}
	}
	for _, ev := range u.calls {
		if ev.lit != nil {
			join(ev.lit)
			continue
		}
		if ev.param >= 0 {
			e.callsParams[ev.param] = true
			continue
		}
		fn := ev.callee
		if fn == nil {
			continue
		}
		var txParams []int
		if entry := a.table.Lookup(fn); entry != nil {
			what := describe(fn)
			switch entry.Kind {
			case Commit:
				e.commits = append(e.commits, Site{ev.call, what})
			case Write:
				if a.isWrite(ev.call, entry) {
					e.commits = append(e.commits, Site{ev.call, "autocommit " + what})
				}
			case Begin:
				e.begins = append(e.begins, Site{ev.call, what})
			case Publish:
				e.publishes = append(e.publishes, Site{ev.call, what})
			}
			if entry.TxParam >= 0 {
				txParams = []int{entry.TxParam}
			}
		} else if a.table.known(vetutil.FuncPkg(fn)) {
			// A driver or broker package of the table: the table is the
			// authority (pgx's Conn.Ping runs an Exec; it writes nothing).
		} else if isInterfaceMethod(fn) {
			for kind, how := range a.ifaceEffects(fn) {
				switch kind {
				case Publish:
					e.publishes = append(e.publishes, Site{ev.call, how})
				case Commit:
					e.commits = append(e.commits, Site{ev.call, how})
				}
			}
		} else if runsNow(fn) {
			for _, l := range ev.argLits {
				join(l)
			}
		} else if f := a.factOf(fn); f != nil {
			if f.Commit != "" {
				e.commits = append(e.commits, Site{ev.call, f.Commit})
			}
			if f.Publish != "" {
				e.publishes = append(e.publishes, Site{ev.call, f.Publish})
			}
			if f.Begin != "" {
				e.begins = append(e.begins, Site{ev.call, f.Begin})
			}
			txParams = f.TxParams
		}
		for _, i := range txParams {
			if l := ev.argLits[i]; l != nil {
				join(l)
			} else if g := ev.argFuncs[i]; g != nil {
				if f := a.factOf(g); f != nil {
					if f.Publish != "" {
						e.publishes = append(e.publishes, Site{ev.call, f.Publish})
					}
					if f.Commit != "" {
						e.commits = append(e.commits, Site{ev.call, f.Commit})
					}
				}
			} else if pi, ok := ev.argParam[i]; ok {
				e.txParams[pi] = true
			}
		}
	}
	return e
}

// finish marks the literals that joined their parent and records each unit's
// sites.
func (a *analyzer) finish() {
	for _, u := range a.units {
		if u.parent != nil {
			continue
		}
		a.record(u)
	}
	var keep []*Unit
	for _, u := range a.units {
		if !u.joined {
			keep = append(keep, u)
		}
	}
	a.units = keep
}

// record evaluates a unit of its own and, recursively, its literals that did
// not join it.
func (a *analyzer) record(u *Unit) {
	e := a.eval(u, map[*Unit]bool{})
	u.Commits, u.Publish, u.Begins = e.commits, e.publishes, e.begins
	for _, s := range u.Publish {
		if a.isExcepted(s.Call) {
			u.Excepted[s.Call] = true
		}
	}
	joined := map[*Unit]bool{}
	for _, l := range e.joined {
		joined[l] = true
		l.joined = true
	}
	// The literals of u and of the literals that joined it that did not join
	// are units of their own.
	var visit func(p *Unit)
	visit = func(p *Unit) {
		for _, l := range p.children {
			if joined[l] {
				visit(l)
			} else {
				a.record(l)
			}
		}
	}
	visit(u)
}

func (a *analyzer) factOf(fn *types.Func) *Fact {
	fn = fn.Origin()
	if f, ok := a.facts[fn]; ok {
		return f
	}
	if fn.Pkg() == a.pass.Pkg {
		return nil
	}
	f := new(Fact)
	if a.pass.ImportObjectFact(fn, f) {
		return f
	}
	return nil
}

func (a *analyzer) exportFacts() {
	for fn, f := range a.facts {
		if !f.empty() && exportable(fn) {
			a.pass.ExportObjectFact(fn, f)
		}
	}
	// Interface methods of this package whose dynamic types here publish or commit.
	scope := a.pass.Pkg.Scope()
	for _, name := range scope.Names() {
		tn, ok := scope.Lookup(name).(*types.TypeName)
		if !ok {
			continue
		}
		it, ok := tn.Type().Underlying().(*types.Interface)
		if !ok {
			continue
		}
		for m := range it.Methods() {
			if m.Pkg() != a.pass.Pkg {
				continue
			}
			eff := a.ifaceEffects(m)
			if len(eff) == 0 {
				continue
			}
			a.pass.ExportObjectFact(m, &Fact{Publish: eff[Publish], Commit: eff[Commit]})
		}
	}
}

// exportable reports whether fn is a package-level function or a method of a
// package-level named type (what object facts can be attached to).
func exportable(fn *types.Func) bool {
	recv := fn.Signature().Recv()
	if recv == nil {
		return fn.Parent() == fn.Pkg().Scope()
	}
	t := recv.Type()
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Parent() == fn.Pkg().Scope()
}

func describe(fn *types.Func) string {
	name := fn.Name()
	if recv := vetutil.RecvName(fn); recv != "" {
		name = recv + "." + name
	}
	return fn.Pkg().Name() + "." + name
}

// runsNow reports helpers that run their function argument before they return.
func runsNow(fn *types.Func) bool {
	switch vetutil.FuncPkg(fn) + "." + vetutil.RecvName(fn) + "." + fn.Name() {
	case "golang.org/x/sync/errgroup.Group.Go", "sync.WaitGroup.Go", "sync.Once.Do":
		return true
	}
	return false
}

func isInterfaceMethod(fn *types.Func) bool {
	recv := fn.Signature().Recv()
	return recv != nil && types.IsInterface(recv.Type())
}

// sqlArg returns the SQL text argument of a Write call, if constant.
func (a *analyzer) isWrite(call *ast.CallExpr, e *Entry) bool {
	switch e.name {
	case "SendBatch", "CopyFrom":
		return true
	}
	for _, arg := range call.Args {
		t := a.pass.TypesInfo.TypeOf(arg)
		if b, ok := t.Underlying().(*types.Basic); !ok || b.Info()&types.IsString == 0 {
			continue
		}
		s, ok := vetutil.ConstString(a.pass.TypesInfo, arg)
		if !ok {
			if p := constPrefix(a.pass.TypesInfo, arg); strings.TrimSpace(p) != "" {
				return writesSQL(p) // "ROLLBACK TO SAVEPOINT " + name, "INSERT INTO " + table
			}
			return !e.Query
		}
		return writesSQL(s)
	}
	return !e.Query
}

// writesSQL reports whether SQL (or its constant beginning) changes data:
// its first keyword is a DML verb, or a WITH whose body holds one. Reads,
// DDL, transaction control and session settings are not committed writes
// an event could describe.
func writesSQL(s string) bool {
	up := strings.ToUpper(strings.TrimSpace(s))
	first := up
	if i := strings.IndexFunc(up, func(r rune) bool { return r < 'A' || r > 'Z' }); i >= 0 {
		first = up[:i]
	}
	switch first {
	case "INSERT", "UPDATE", "DELETE", "MERGE", "UPSERT", "COPY", "CALL", "COMMIT":
		return true
	case "WITH":
		for _, kw := range []string{"INSERT", "UPDATE", "DELETE", "MERGE"} {
			if containsWord(up, kw) {
				return true
			}
		}
	}
	return false
}

func containsWord(s, w string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		j += i
		before := j == 0 || !isWordByte(s[j-1])
		after := j+len(w) == len(s) || !isWordByte(s[j+len(w)])
		if before && after {
			return true
		}
		i = j + len(w)
	}
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}

// Set is an effects analyzer and the table it reads. The analyzers of one run
// share one Set; flags and settings add to its table before the run.
type Set struct {
	Analyzer *analysis.Analyzer
	Table    *Table
}

// NewSet returns a Set over the built-in table.
func NewSet() *Set {
	t := NewTable()
	return &Set{Analyzer: New(t), Table: t}
}

// Default is the Set of the analyzers' package-level instances.
var Default = NewSet()

// constPrefix returns the constant text a string expression starts with.
func constPrefix(info *types.Info, e ast.Expr) string {
	e = ast.Unparen(e)
	if s, ok := vetutil.ConstString(info, e); ok {
		return s
	}
	if b, ok := e.(*ast.BinaryExpr); ok {
		return constPrefix(info, b.X)
	}
	return ""
}
