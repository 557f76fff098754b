package main

import (
	"fmt"
	"go/constant"
	"go/token"
	"go/types"
	"sort"
	"strings"
)

// features returns the exported API of pkg, one line per exported name (and per
// field, method and interface method), in the format of the Go project's
// api/go1.*.txt:
//
//	pkg P, func New(Config) (*Client, error)
//	pkg P, method (*Client) Close() error
//	pkg P, type Config struct
//	pkg P, type Config struct, TTL time.Duration
//	pkg P, const DefaultTTL time.Duration = 15000000000
//
// Types are written with package names (context.Context, *pgxpool.Pool); names of
// pkg itself are unqualified.
func features(pkg *types.Package) []string {
	w := &writer{pkg: pkg}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		if !token.IsExported(name) {
			continue
		}
		w.object(scope.Lookup(name))
	}
	sort.Strings(w.lines)
	return w.lines
}

type writer struct {
	pkg   *types.Package
	lines []string
}

func (w *writer) emit(format string, args ...any) {
	w.lines = append(w.lines, "pkg "+w.pkg.Path()+", "+fmt.Sprintf(format, args...))
}

// typ writes t with package names as qualifiers (none for w.pkg's own names)
// and without parameter names in function types: renaming a callback's
// parameter changes no caller.
func (w *writer) typ(t types.Type) string {
	switch t := t.(type) {
	case *types.Signature:
		return "func" + w.signature(t)
	case *types.Pointer:
		return "*" + w.typ(t.Elem())
	case *types.Slice:
		return "[]" + w.typ(t.Elem())
	case *types.Array:
		return fmt.Sprintf("[%d]%s", t.Len(), w.typ(t.Elem()))
	case *types.Map:
		return "map[" + w.typ(t.Key()) + "]" + w.typ(t.Elem())
	case *types.Chan:
		switch t.Dir() {
		case types.SendOnly:
			return "chan<- " + w.typ(t.Elem())
		case types.RecvOnly:
			return "<-chan " + w.typ(t.Elem())
		}
		if c, ok := t.Elem().(*types.Chan); ok && c.Dir() == types.RecvOnly {
			return "chan (" + w.typ(t.Elem()) + ")"
		}
		return "chan " + w.typ(t.Elem())
	case *types.Named:
		return w.instance(t.Obj(), t.TypeArgs())
	case *types.Alias:
		return w.instance(t.Obj(), t.TypeArgs())
	case *types.Struct:
		parts := make([]string, t.NumFields())
		for i := range t.NumFields() {
			f := t.Field(i)
			if f.Embedded() {
				parts[i] = w.typ(f.Type())
			} else {
				parts[i] = f.Name() + " " + w.typ(f.Type())
			}
		}
		return "struct{" + strings.Join(parts, "; ") + "}"
	case *types.Interface:
		var parts []string
		for i := range t.NumEmbeddeds() {
			parts = append(parts, w.typ(t.EmbeddedType(i)))
		}
		for i := range t.NumExplicitMethods() {
			m := t.ExplicitMethod(i)
			parts = append(parts, m.Name()+w.signature(m.Type().(*types.Signature)))
		}
		if len(parts) == 0 {
			if t.IsComparable() {
				return "comparable"
			}
			return "interface{}"
		}
		return "interface{ " + strings.Join(parts, "; ") + " }"
	case *types.Union:
		parts := make([]string, t.Len())
		for i := range t.Len() {
			parts[i] = w.typ(t.Term(i).Type())
			if t.Term(i).Tilde() {
				parts[i] = "~" + parts[i]
			}
		}
		return strings.Join(parts, " | ")
	}
	// basic types, type parameters
	return types.TypeString(t, func(p *types.Package) string {
		if p == w.pkg {
			return ""
		}
		return p.Name()
	})
}

func (w *writer) qualify(obj *types.TypeName) string {
	if obj.Pkg() == nil || obj.Pkg() == w.pkg {
		return obj.Name()
	}
	return obj.Pkg().Name() + "." + obj.Name()
}

func (w *writer) object(obj types.Object) {
	switch obj := obj.(type) {
	case *types.Const:
		w.emit("const %s %s = %s", obj.Name(), w.typ(obj.Type()), constString(obj.Val()))
	case *types.Var:
		w.emit("var %s %s", obj.Name(), w.typ(obj.Type()))
	case *types.Func:
		sig := obj.Type().(*types.Signature)
		w.emit("func %s%s%s", obj.Name(), w.typeParams(sig.TypeParams()), w.signature(sig))
	case *types.TypeName:
		w.typeName(obj)
	}
}

// constString is the constant's exact value (a string quoted): a changed
// default is a change of the API.
func constString(v constant.Value) string { return v.ExactString() }

func (w *writer) typeParams(tps *types.TypeParamList) string {
	if tps == nil || tps.Len() == 0 {
		return ""
	}
	parts := make([]string, tps.Len())
	for i := range tps.Len() {
		tp := tps.At(i)
		parts[i] = tp.Obj().Name() + " " + w.typ(tp.Constraint())
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// signature writes (params) results without parameter names: a renamed
// parameter is not a change of the API.
func (w *writer) signature(sig *types.Signature) string {
	var b strings.Builder
	b.WriteString("(")
	for i := range sig.Params().Len() {
		if i > 0 {
			b.WriteString(", ")
		}
		t := sig.Params().At(i).Type()
		if sig.Variadic() && i == sig.Params().Len()-1 {
			b.WriteString("..." + w.typ(t.(*types.Slice).Elem()))
			continue
		}
		b.WriteString(w.typ(t))
	}
	b.WriteString(")")
	switch res := sig.Results(); res.Len() {
	case 0:
	case 1:
		b.WriteString(" " + w.typ(res.At(0).Type()))
	default:
		b.WriteString(" (")
		for i := range res.Len() {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(w.typ(res.At(i).Type()))
		}
		b.WriteString(")")
	}
	return b.String()
}

func (w *writer) typeName(obj *types.TypeName) {
	name := obj.Name()
	if obj.IsAlias() {
		w.emit("type %s = %s", name, w.typ(types.Unalias(obj.Type())))
		return
	}
	named, ok := obj.Type().(*types.Named)
	if !ok {
		return
	}
	head := name + w.typeParams(named.TypeParams())
	switch u := named.Underlying().(type) {
	case *types.Struct:
		w.emit("type %s struct", head)
		for i := range u.NumFields() {
			f := u.Field(i)
			if !f.Exported() {
				continue
			}
			if f.Embedded() {
				w.emit("type %s struct, embedded %s", head, w.typ(f.Type()))
				continue
			}
			w.emit("type %s struct, %s %s", head, f.Name(), w.typ(f.Type()))
		}
	case *types.Interface:
		var methods []string
		for i := range u.NumMethods() {
			m := u.Method(i)
			if !m.Exported() {
				// An unexported method: nobody outside can implement it.
				methods = append(methods, "unexported methods")
				continue
			}
			methods = append(methods, m.Name())
			w.emit("type %s interface, %s%s", head, m.Name(), w.signature(m.Type().(*types.Signature)))
		}
		for i := range u.NumEmbeddeds() {
			if _, isIface := u.EmbeddedType(i).Underlying().(*types.Interface); !isIface {
				w.emit("type %s interface, embedded constraint %s", head, w.typ(u.EmbeddedType(i)))
			}
		}
		sort.Strings(methods)
		methods = dedupe(methods)
		w.emit("type %s interface { %s }", head, strings.Join(methods, ", "))
		return // an interface's methods are its lines above, not a method set
	default:
		w.emit("type %s %s", head, w.typ(u))
	}
	w.methods(named)
}

// methods writes the exported method set of named, promoted methods included:
// (T) for the methods of T, (*T) for those only *T has.
func (w *writer) methods(named *types.Named) {
	recv := named.Obj().Name()
	if tps := named.TypeParams(); tps != nil && tps.Len() > 0 {
		names := make([]string, tps.Len())
		for i := range tps.Len() {
			names[i] = tps.At(i).Obj().Name()
		}
		recv += "[" + strings.Join(names, ", ") + "]"
	}
	valueSet := types.NewMethodSet(named)
	ptrSet := types.NewMethodSet(types.NewPointer(named))
	for i := range ptrSet.Len() {
		sel := ptrSet.At(i)
		m := sel.Obj().(*types.Func)
		if !m.Exported() {
			continue
		}
		r := "*" + recv
		if valueSet.Lookup(m.Pkg(), m.Name()) != nil {
			r = recv
		}
		w.emit("method (%s) %s%s", r, m.Name(), w.signature(sel.Type().(*types.Signature)))
	}
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// instance is a named type or alias with its type arguments, if any.
func (w *writer) instance(obj *types.TypeName, args *types.TypeList) string {
	s := w.qualify(obj)
	if args == nil || args.Len() == 0 {
		return s
	}
	parts := make([]string, args.Len())
	for i := range args.Len() {
		parts[i] = w.typ(args.At(i))
	}
	return s + "[" + strings.Join(parts, ", ") + "]"
}
