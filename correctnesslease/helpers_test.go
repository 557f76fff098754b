package correctnesslease

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// testTenant returns a tenant unique to the test.
func testTenant(t testing.TB) string {
	r := strings.NewReplacer("/", "-", " ", "-", "#", "-")
	n := r.Replace(t.Name())
	if len(n) > 40 {
		n = n[len(n)-40:]
	}
	return "t-" + strings.Trim(n, "-")
}

// newSession opens a session that is closed when the test ends.
func newSession(t testing.TB, cli *clientv3.Client, cfg Config) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	s, err := NewSession(ctx, cli, cfg)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

// rpcCounter counts gRPC calls by method on a client.
type rpcCounter struct {
	keepalives atomic.Int64 // LeaseKeepAlive streams: one per KeepAliveOnce
}

func (c *rpcCounter) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if strings.HasSuffix(method, "/LeaseKeepAlive") {
		c.keepalives.Add(1)
	}
	return streamer(ctx, desc, cc, method, opts...)
}

// countingClient returns a client of endpoints whose keepalive RPCs are counted.
func countingClient(t testing.TB, endpoints ...string) (*clientv3.Client, *rpcCounter) {
	t.Helper()
	rc := &rpcCounter{}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainStreamInterceptor(rc.stream)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, rc
}

var _ = coordtest.Etcd

func clientv3WithPrefix() clientv3.OpOption { return clientv3.WithPrefix() }

// lossReason returns the LossReason of a context's cause or error, or "".
func lossReason(err error) coord.LossReason {
	var ae *coord.AuthorityLostError
	if errors.As(err, &ae) {
		return ae.Reason
	}
	return ""
}

// waitKeys blocks until prefix holds n keys.
func waitKeys(t testing.TB, cli *clientv3.Client, prefix string, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("prefix %s has %d keys, want %d", prefix, resp.Count, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitDone waits for ch to close, failing the test after d.
func waitDone(t testing.TB, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not done after %v", what, d)
	}
}

// testLogger logs through t.Log at Info and above (so output shows on failure only).
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
