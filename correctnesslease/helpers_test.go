package correctnesslease

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

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
