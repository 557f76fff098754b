package coordkit_test

import (
	"go/ast"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// thePlane is the one package that may open etcd watches (docs/architecture.md,
// "The watch plane"): every other package follows keys through it.
const thePlane = modulePath + "/internal/watchplane"

// checkWatches refuses an etcd watch opened anywhere but the watch plane: a
// call of a method named Watch or RequestProgress (clientv3.Client's and
// clientv3.Watcher's) in a file that imports etcd's client. Calls on an
// imported package (membership.Watch) are not watches of etcd.
func checkWatches(p *pkg) []string {
	if p.importPath == thePlane {
		return nil
	}
	var bad []string
	for name, f := range p.files {
		imported := map[string]bool{}
		etcd := false
		for _, im := range f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			local := ip[strings.LastIndex(ip, "/")+1:]
			if im.Name != nil {
				local = im.Name.Name
			}
			imported[local] = true
			etcd = etcd || ip == "go.etcd.io/etcd/client/v3"
		}
		if !etcd {
			continue
		}
		selectorCalls(f, func(call *ast.CallExpr, sel *ast.SelectorExpr) {
			if sel.Sel.Name != "Watch" && sel.Sel.Name != "RequestProgress" {
				return
			}
			if id, ok := sel.X.(*ast.Ident); ok && imported[id.Name] {
				return // a package's function, not a client's method
			}
			bad = append(bad, p.dir+"/"+name+":"+strconv.Itoa(p.fset.Position(call.Pos()).Line)+
				": "+sel.Sel.Name+" opens an etcd watch outside "+thePlane+"; subscribe through the plane")
		})
	}
	slices.Sort(bad)
	return bad
}

// TestEveryEtcdWatchGoesThroughThePlane: no SDK package watches etcd itself.
func TestEveryEtcdWatchGoesThroughThePlane(t *testing.T) {
	for _, p := range modulePkgs(t) {
		for _, v := range checkWatches(p) {
			t.Error(v)
		}
	}
}

// TestWatchCheckCatchesARawWatch: the fixture's Watch and RequestProgress calls
// are caught.
func TestWatchCheckCatchesARawWatch(t *testing.T) {
	got := checkWatches(loadPkg(t, "testdata/conventions/rawwatch", modulePath+"/rawwatch"))
	if len(got) != 2 || !strings.Contains(got[0], "RequestProgress opens an etcd watch") || !strings.Contains(got[1], "Watch opens an etcd watch") {
		t.Fatalf("the fixture's two raw watches: got %q", got)
	}
}
