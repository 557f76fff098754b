package effects

import (
	"go/types"
	"strings"
)

// ifaceEffects resolves a call through an interface method m: a publish when m
// matches a known broker client's method (its name, and a signature that
// mentions the client's package or has the client's shape), and a publish or
// commit when a dynamic type of m's interface visible here does (a concrete
// type of this package or a broker client of a package it imports), or when the
// package that declares the interface says so in a fact.
func (a *analyzer) ifaceEffects(m *types.Func) map[Kind]string {
	if got, ok := a.ifaceKey[m]; ok {
		return got
	}
	out := map[Kind]string{}
	a.ifaceKey[m] = out // cycles resolve to nothing
	if m.Pkg() == nil || a.inGoroot(m.Pos()) && !a.table.known(m.Pkg().Path()) {
		return out // error.Error, io.Writer.Write, context.Context.Done: the standard library's interfaces
	}
	iface := describe(m)
	if m.Pkg() != nil && m.Pkg() != a.pass.Pkg {
		f := new(Fact)
		if a.pass.ImportObjectFact(m, f) {
			if f.Publish != "" {
				out[Publish] = f.Publish
			}
			if f.Commit != "" {
				out[Commit] = f.Commit
			}
		}
	}
	if _, ok := out[Publish]; !ok {
		shape := shapeOf(m.Signature())
		for _, e := range a.table.entriesNamed(m.Name(), Publish) {
			if e.Shape != "" && e.Shape == shape || mentionsPackage(m.Signature(), e.pkg) {
				out[Publish] = iface + " (like " + e.short() + ")"
				break
			}
		}
	}
	it, _ := m.Signature().Recv().Type().Underlying().(*types.Interface)
	if it == nil {
		return out
	}
	for _, t := range a.candidates() {
		if len(out) == 2 {
			break
		}
		var recv types.Type = t
		if !types.Implements(recv, it) {
			recv = types.NewPointer(t)
			if !types.Implements(recv, it) {
				continue
			}
		}
		obj, _, _ := types.LookupFieldOrMethod(recv, true, m.Pkg(), m.Name())
		impl, ok := obj.(*types.Func)
		if !ok {
			continue
		}
		via := iface + " → " + t.Obj().Name() + "." + m.Name()
		if e := a.table.Lookup(impl); e != nil {
			if e.Kind == Publish && out[Publish] == "" {
				out[Publish] = via
			}
			continue
		}
		if f := a.factOf(impl); f != nil {
			if f.Publish != "" && out[Publish] == "" {
				out[Publish] = via + " → " + lastStep(f.Publish)
			}
			if f.Commit != "" && out[Commit] == "" {
				out[Commit] = via + " → " + lastStep(f.Commit)
			}
		}
	}
	return out
}

func lastStep(s string) string { return s[strings.LastIndex(s, "→ ")+len("→ "):] }

// candidates are the dynamic types an interface call may reach that this
// package can see: its own concrete named types, and the broker clients of the
// packages it imports.
func (a *analyzer) candidates() []*types.Named {
	if a.brokers == nil {
		a.brokers = append([]*types.Named{}, a.named...)
		for _, imp := range a.pass.Pkg.Imports() {
			seen := map[string]bool{}
			for _, list := range a.table.byName {
				for _, e := range list {
					if e.Kind != Publish || e.pkg != imp.Path() || e.typ == "" || seen[e.typ] {
						continue
					}
					seen[e.typ] = true
					if tn, ok := imp.Scope().Lookup(e.typ).(*types.TypeName); ok {
						if n, ok := tn.Type().(*types.Named); ok && !types.IsInterface(n) {
							a.brokers = append(a.brokers, n)
						}
					}
				}
			}
		}
	}
	return a.brokers
}

// shapeOf is a signature without parameter names.
func shapeOf(sig *types.Signature) string {
	var b strings.Builder
	b.WriteString("func(")
	for i := 0; i < sig.Params().Len(); i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		t := sig.Params().At(i).Type()
		if sig.Variadic() && i == sig.Params().Len()-1 {
			b.WriteString("..." + types.TypeString(t.(*types.Slice).Elem(), nil))
			continue
		}
		b.WriteString(types.TypeString(t, nil))
	}
	b.WriteString(")")
	switch sig.Results().Len() {
	case 0:
	case 1:
		b.WriteString(" " + types.TypeString(sig.Results().At(0).Type(), nil))
	default:
		b.WriteString(" (")
		for i := 0; i < sig.Results().Len(); i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(types.TypeString(sig.Results().At(i).Type(), nil))
		}
		b.WriteString(")")
	}
	return b.String()
}

// mentionsPackage reports whether a signature's parameter or result types
// name a type of package path.
func mentionsPackage(sig *types.Signature, path string) bool {
	found := false
	var visit func(t types.Type)
	visit = func(t types.Type) {
		if found || t == nil {
			return
		}
		switch t := types.Unalias(t).(type) {
		case *types.Named:
			if t.Obj().Pkg() != nil && t.Obj().Pkg().Path() == path {
				found = true
			}
		case *types.Pointer:
			visit(t.Elem())
		case *types.Slice:
			visit(t.Elem())
		case *types.Array:
			visit(t.Elem())
		case *types.Map:
			visit(t.Key())
			visit(t.Elem())
		case *types.Chan:
			visit(t.Elem())
		}
	}
	for _, tup := range []*types.Tuple{sig.Params(), sig.Results()} {
		for i := 0; i < tup.Len(); i++ {
			visit(tup.At(i).Type())
		}
	}
	return found
}
