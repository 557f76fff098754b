// Package vetutil holds what every coordvet analyzer shares: matching SDK and
// third-party objects by import path (the analyzers never import the SDK), the
// //coordvet:ignore directive, and the reporter that formats, suppresses and
// links every diagnostic.
package vetutil

import (
	"go/ast"
	"go/constant"
	"go/types"
	"strings"
)

// SDK is the import path prefix of the coordkit SDK. Every package under it is
// part of the SDK, including its test packages ("…/saga_test").
const SDK = "github.com/coordkit/coordkit"

// IsSDK reports whether the package path belongs to the coordkit SDK.
func IsSDK(path string) bool {
	return path == SDK || strings.HasPrefix(path, SDK+"/") || path == SDK+"_test"
}

// IsPackage reports whether path is pkg itself or its external test package
// (pkg + "_test").
func IsPackage(path, pkg string) bool {
	return path == pkg || path == pkg+"_test"
}

// UnderPackage reports whether path is pkg, one of its subpackages, or the
// external test package of either.
func UnderPackage(path, pkg string) bool {
	path = strings.TrimSuffix(path, "_test")
	return path == pkg || strings.HasPrefix(path, pkg+"/")
}

// Callee returns the function or method a call statically invokes (for a
// generic function, its uninstantiated origin), or nil for a call of a function
// value, a conversion or a builtin.
func Callee(info *types.Info, call *ast.CallExpr) *types.Func {
	return FuncRef(info, call.Fun)
}

// FuncRef returns the function or method an expression names — f, pkg.F,
// x.Method, F[T] — as its uninstantiated origin, or nil.
func FuncRef(info *types.Info, e ast.Expr) *types.Func {
	e = ast.Unparen(e)
	switch f := e.(type) {
	case *ast.IndexExpr:
		e = ast.Unparen(f.X)
	case *ast.IndexListExpr:
		e = ast.Unparen(f.X)
	}
	var id *ast.Ident
	switch f := e.(type) {
	case *ast.Ident:
		id = f
	case *ast.SelectorExpr:
		id = f.Sel
	default:
		return nil
	}
	fn, _ := info.Uses[id].(*types.Func)
	if fn == nil {
		return nil
	}
	return fn.Origin()
}

// FuncPkg returns the import path of the package that declares fn, or "".
func FuncPkg(fn *types.Func) string {
	if fn == nil || fn.Pkg() == nil {
		return ""
	}
	return fn.Pkg().Path()
}

// IsFunc reports whether fn is the package-level function pkg.name.
func IsFunc(fn *types.Func, pkg, name string) bool {
	return fn != nil && fn.Name() == name && FuncPkg(fn) == pkg && fn.Signature().Recv() == nil
}

// RecvName returns the name of fn's receiver type (pointers removed), or "" for a
// function or a method of an unnamed type.
func RecvName(fn *types.Func) string {
	recv := fn.Signature().Recv()
	if recv == nil {
		return ""
	}
	t := recv.Type()
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	switch n := types.Unalias(t).(type) {
	case *types.Named:
		return n.Obj().Name()
	}
	return ""
}

// IsNamed reports whether t (or what it points to, if ptr is true) is the named
// type pkg.name.
func IsNamed(t types.Type, pkg, name string, ptr bool) bool {
	if t == nil {
		return false
	}
	if ptr {
		p, ok := types.Unalias(t).(*types.Pointer)
		if !ok {
			return false
		}
		t = p.Elem()
	}
	n, ok := types.Unalias(t).(*types.Named)
	if !ok {
		return false
	}
	obj := n.Obj()
	return obj.Name() == name && obj.Pkg() != nil && obj.Pkg().Path() == pkg
}

// ConstString returns the value of e if it is a constant string.
func ConstString(info *types.Info, e ast.Expr) (string, bool) {
	tv, ok := info.Types[e]
	if !ok || tv.Value == nil {
		return "", false
	}
	if tv.Value.Kind() != constant.String {
		return "", false
	}
	return constant.StringVal(tv.Value), true
}
