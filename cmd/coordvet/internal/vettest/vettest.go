// Package vettest helps the analyzers' tests find the shared stub tree and pin
// the date exceptions are judged on.
package vettest

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

// Today is the date the tests judge exceptions on: testdata's exceptions
// expire 2026-09-30 (valid), 2026-06-30 (past) or 2027-03-01 (too far ahead).
const Today = "2026-07-01"

// TestData pins COORDVET_TODAY to Today for the test and returns the absolute
// path of cmd/coordvet/testdata, the GOPATH-style tree of stub packages and
// test cases every analyzer test loads (testdata/src).
func TestData(t testing.TB) string {
	t.Helper()
	t.Setenv(vetutil.TodayEnv, Today)
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("vettest: cannot locate the testdata directory")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata")
}
