package correctnesslease

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestMain runs the package's tests with a leak check, and gives the examples an
// embedded etcd through COORD_EXAMPLE_ETCD. Re-executed with pausedChildArg, the
// test binary is the paused holder of TestPausedHolderReportsItsOwnExpiry.
func TestMain(m *testing.M) {
	if i := slices.Index(os.Args, pausedChildArg); i >= 0 {
		os.Exit(pausedChild(os.Args[i+1:]))
	}
	os.Exit(runWithExampleEtcd(m))
}

func runWithExampleEtcd(m *testing.M) int {
	tb := &mainTB{}
	defer tb.cleanup()
	e := coordtest.Etcd(tb)
	os.Setenv("COORD_EXAMPLE_ETCD", e.Endpoints[0])
	code := m.Run()
	if code != 0 {
		return code
	}
	tb.cleanup()
	if err := goleak.Find(); err != nil {
		os.Stderr.WriteString("goleak: " + err.Error() + "\n")
		return 1
	}
	return 0
}

// mainTB is the testing.TB of TestMain, for the one server the examples share.
// Only the methods coordtest.Etcd uses are implemented.
type mainTB struct {
	testing.TB
	dirs     []string
	cleanups []func()
}

func (*mainTB) Helper() {}

func (*mainTB) Fatal(args ...any) { panic(fmt.Sprint(args...)) }

func (*mainTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

func (*mainTB) Errorf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

func (*mainTB) Name() string { return "TestMain" }

func (tb *mainTB) TempDir() string {
	d, err := os.MkdirTemp("", "correctnesslease-example-")
	if err != nil {
		panic(err)
	}
	tb.dirs = append(tb.dirs, d)
	return d
}

func (tb *mainTB) Cleanup(f func()) { tb.cleanups = append(tb.cleanups, f) }

// cleanup runs the cleanups (last first) and removes the temp dirs, once.
func (tb *mainTB) cleanup() {
	for i := len(tb.cleanups) - 1; i >= 0; i-- {
		tb.cleanups[i]()
	}
	tb.cleanups = nil
	for _, d := range tb.dirs {
		os.RemoveAll(d)
	}
	tb.dirs = nil
}
