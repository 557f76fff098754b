package coordtest

import (
	"sort"
	"testing"
)

// TestPostgresBinDirOrder: the newest installed version wins, by version, not by
// name (the glob returns 10 before 9.6).
func TestPostgresBinDirOrder(t *testing.T) {
	dirs := []string{"/usr/lib/postgresql/10/bin", "/usr/lib/postgresql/9.6/bin", "/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/9.10/bin"}
	sort.Slice(dirs, func(i, j int) bool { return versionLess(dirs[j], dirs[i]) })
	want := []string{"/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/10/bin", "/usr/lib/postgresql/9.10/bin", "/usr/lib/postgresql/9.6/bin"}
	for i := range want {
		if dirs[i] != want[i] {
			t.Fatalf("order %v, want %v", dirs, want)
		}
	}
}
