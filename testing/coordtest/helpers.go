package coordtest

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/coordkit/coordkit/coord"
)

// Tenant returns a tenant name unique to the test: "t-" and the end of the
// test's name (at most 40 characters), with "/", " " and "#" made "-". Two
// tests never share one, so they may run against one etcd.
func Tenant(t testing.TB) string {
	n := strings.NewReplacer("/", "-", " ", "-", "#", "-").Replace(t.Name())
	if len(n) > 40 {
		n = n[len(n)-40:]
	}
	return "t-" + strings.Trim(n, "-")
}

// Logger returns a logger writing through t.Log at Info and above: shown when
// the test fails or runs with -v. Like t.Log, it must not be used after the
// test ended (stop what logs first).
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// RPCCounter counts the gRPC calls a client made, by method. Safe for
// concurrent use.
type RPCCounter struct {
	mu    sync.Mutex
	calls map[string]int64
}

// Count returns how many calls were made to the methods whose full name ends
// in suffix ("/LeaseKeepAlive", "/Range", "/Watch"); "" counts every call.
// A stream counts once, when it is opened.
func (c *RPCCounter) Count(suffix string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for m, k := range c.calls {
		if strings.HasSuffix(m, suffix) {
			n += k
		}
	}
	return n
}

func (c *RPCCounter) add(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[method]++
}

// CountingEtcdClient returns a client of endpoints (2 s dial timeout, closed
// when the test ends) and the counter of the RPCs it makes: a test that says
// how many requests a component sends (one keepalive stream per session, no
// read per check) reads it.
func CountingEtcdClient(t testing.TB, endpoints ...string) (*clientv3.Client, *RPCCounter) {
	t.Helper()
	rc := &RPCCounter{calls: map[string]int64{}}
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		rc.add(method)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		rc.add(method)
		return streamer(ctx, desc, cc, method, opts...)
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)},
	})
	if err != nil {
		t.Fatalf("coordtest: etcd client for %v: %v", endpoints, err)
	}
	t.Cleanup(func() { c.Close() })
	return c, rc
}

// IsInvalidName reports whether err refuses a name set in Config field: it
// matches coord.ErrInvalidName, unwraps to a *coord.NameError, and says
// "invalid config <field>: " — the *ConfigError every package returns for a
// bad table, schema or tenant name (docs/architecture.md, "Names in
// PostgreSQL").
func IsInvalidName(err error, field string) bool {
	var ne *coord.NameError
	return errors.Is(err, coord.ErrInvalidName) && errors.As(err, &ne) &&
		strings.Contains(err.Error(), "invalid config "+field+": ")
}

// TextRows runs a query of one text column (an audit row rendered as
// "actor reason before after", say) and returns its rows, failing the test on
// an error. A test compares what a table holds in one line.
func TextRows(t testing.TB, db *pgxpool.Pool, sql string, args ...any) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		t.Fatalf("coordtest: %s: %v", sql, err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("coordtest: %s: %v", sql, err)
	}
	return got
}
