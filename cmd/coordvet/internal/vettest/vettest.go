// Package vettest helps the analyzers' tests find the shared stub tree.
package vettest

import (
	"path/filepath"
	"runtime"
	"testing"
)

// TestData returns the absolute path of cmd/coordvet/testdata, the GOPATH-style
// tree of stub packages and test cases every analyzer test loads.
func TestData(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("vettest: cannot locate the testdata directory")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata")
}
