package failstatic_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// Environment of the re-executed client process (see runChildIfAsked).
const (
	envChild     = "FAILSTATIC_TEST_CHILD" // state file path; set means "be the child"
	envPrefix    = "FAILSTATIC_TEST_PREFIX"
	envEndpoints = "FAILSTATIC_TEST_ENDPOINTS"
	envMaxStale  = "FAILSTATIC_TEST_MAX_STALE"
	childReads   = 25
)

// runChildIfAsked turns the test binary into a fresh client process: it starts a
// Cache from the state file, reads it childReads times, 20 ms apart, printing
// one line per read, and exits. Called from TestMain before anything else.
func runChildIfAsked() {
	state := os.Getenv(envChild)
	if state == "" {
		return
	}
	os.Exit(childMain(state))
}

func childMain(state string) int {
	maxStale, _ := time.ParseDuration(os.Getenv(envMaxStale))
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: strings.Split(os.Getenv(envEndpoints), ","), DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
	})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer cli.Close()
	prefix := os.Getenv(envPrefix)
	cfg := baseConfig(prefix)
	cfg.StatePath = state
	cfg.Classes = []failstatic.KeyClass{{Name: "revocations", Prefix: "revocations/", MaxStaleness: maxStale}}
	start := time.Now()
	c, err := failstatic.New(context.Background(), cli, cfg)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer c.Close()
	fmt.Println("started_ms", time.Since(start).Milliseconds())
	for range childReads {
		s := c.Get()
		_, lerr := c.Lookup(prefix + "revocations/token-1")
		fmt.Println("read", time.Now().UnixNano(), s.Source, s.Revision, int64(s.Staleness), len(s.Value), errors.Is(lerr, failstatic.ErrStale))
		time.Sleep(20 * time.Millisecond)
	}
	return 0
}

// childRead is one line of the child's output.
type childRead struct {
	at        time.Time
	source    string
	revision  int64
	staleness time.Duration
	keys      int
	closed    bool
}

// runChild re-executes the test binary as a client process against endpoints,
// starting from state, and returns its reads.
func runChild(t *testing.T, state, prefix string, endpoints []string, maxStale time.Duration) (startMs int64, reads []childRead) {
	t.Helper()
	t.Setenv(envChild, state)
	t.Setenv(envPrefix, prefix)
	t.Setenv(envEndpoints, strings.Join(endpoints, ","))
	t.Setenv(envMaxStale, maxStale.String())
	p := coordtest.StartProcess(t, "failstatic client", os.Args[0], "-test.run=^$")
	select {
	case <-p.Exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("client process did not finish:\n%s", p.Output())
	}
	os.Unsetenv(envChild) // t.Setenv restores at cleanup; children started later must not inherit it
	for _, line := range strings.Split(p.Output(), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "started_ms":
			startMs, _ = strconv.ParseInt(f[1], 10, 64)
		case len(f) == 7 && f[0] == "read":
			ns, _ := strconv.ParseInt(f[1], 10, 64)
			rev, _ := strconv.ParseInt(f[3], 10, 64)
			st, _ := strconv.ParseInt(f[4], 10, 64)
			keys, _ := strconv.Atoi(f[5])
			reads = append(reads, childRead{time.Unix(0, ns), f[2], rev, time.Duration(st), keys, f[6] == "true"})
		case len(f) > 0 && f[0] == "error":
			t.Fatalf("client process: %s", line)
		}
	}
	if len(reads) != childReads {
		t.Fatalf("client process made %d reads, want %d:\n%s", len(reads), childReads, p.Output())
	}
	return startMs, reads
}
