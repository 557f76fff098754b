package correctnesslease

import (
	"os"
	"slices"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the package's tests with a leak check. Re-executed with
// pausedChildArg, the test binary is the paused holder of
// TestPausedHolderReportsItsOwnExpiry.
func TestMain(m *testing.M) {
	if i := slices.Index(os.Args, pausedChildArg); i >= 0 {
		os.Exit(pausedChild(os.Args[i+1:]))
	}
	goleak.VerifyTestMain(m)
}
