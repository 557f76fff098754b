package effects

import (
	"go/types"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/packages"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

// TestTableMatchesSDK loads the SDK of this checkout and checks that every SDK
// entry of the table names a function or method that exists, with a function
// parameter where the entry says one runs in the transaction: a renamed SDK
// function fails here, with the one line of table.go to edit, instead of
// silently switching a check off.
func TestTableMatchesSDK(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root: %v", err)
	}
	var sdkEntries []Entry
	paths := map[string]bool{}
	for _, e := range Builtin() {
		if vetutil.IsSDK(e.pkg) {
			sdkEntries = append(sdkEntries, e)
			paths[e.pkg] = true
		}
	}
	var patterns []string
	for p := range paths {
		patterns = append(patterns, p)
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes, Dir: root, Env: append(os.Environ(), "GOWORK=off")}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]*types.Package{}
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			t.Fatalf("%s: %v", p.PkgPath, p.Errors)
		}
		byPath[p.PkgPath] = p.Types
	}
	for _, e := range sdkEntries {
		pkg := byPath[e.pkg]
		if pkg == nil {
			t.Errorf("table.go: %s: package %s is gone", e.Target, e.pkg)
			continue
		}
		fn := lookup(pkg, e)
		if fn == nil {
			t.Errorf("table.go: %s: no such function or method in the SDK", e.Target)
			continue
		}
		if e.TxParam >= 0 {
			params := fn.Signature().Params()
			if e.TxParam >= params.Len() {
				t.Errorf("table.go: %s: argument %d does not exist", e.Target, e.TxParam+1)
				continue
			}
			if _, ok := params.At(e.TxParam).Type().Underlying().(*types.Signature); !ok {
				t.Errorf("table.go: %s: argument %d is %s, not a function", e.Target, e.TxParam+1, params.At(e.TxParam).Type())
			}
		}
	}
	t.Logf("%d SDK entries of the table match the SDK", len(sdkEntries))
}

func lookup(pkg *types.Package, e Entry) *types.Func {
	if e.typ == "" {
		if fn, ok := pkg.Scope().Lookup(e.name).(*types.Func); ok {
			return fn
		}
		return nil
	}
	tn, ok := pkg.Scope().Lookup(e.typ).(*types.TypeName)
	if !ok {
		return nil
	}
	for _, t := range []types.Type{tn.Type(), types.NewPointer(tn.Type())} {
		obj, _, _ := types.LookupFieldOrMethod(t, true, pkg, e.name)
		if fn, ok := obj.(*types.Func); ok {
			return fn
		}
	}
	return nil
}

func TestWritesSQL(t *testing.T) {
	for sql, want := range map[string]bool{
		"INSERT INTO orders VALUES ($1)": true, "  update x set y = 1": true, "delete from t": true,
		"WITH moved AS (DELETE FROM a RETURNING *) INSERT INTO b SELECT * FROM moved": true,
		"select * from t": false, "SELECT 1 FOR UPDATE": false, "CREATE SCHEMA x": false,
		"ROLLBACK TO SAVEPOINT sp_1": false, "SET lock_timeout = '1s'": false, "WITH x AS (SELECT 1) SELECT * FROM x": false,
		"COMMIT": true,
	} {
		if got := writesSQL(sql); got != want {
			t.Errorf("writesSQL(%q) = %v, want %v", sql, got, want)
		}
	}
}
