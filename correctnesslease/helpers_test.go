package correctnesslease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// newSession opens a session that is closed when the test ends.
func newSession(t testing.TB, cli *clientv3.Client, cfg Config) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cfg.Logger == nil {
		cfg.Logger = coordtest.Logger(t)
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

// mustAcquire acquires name on s, failing the test if Acquire returns an error.
func mustAcquire(ctx context.Context, t testing.TB, s *Session, name string) *Lease {
	t.Helper()
	l, err := Acquire(ctx, s, name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// acquireInBackground runs Acquire(ctx, s, name) in a goroutine and sends its
// error on the returned channel. A lease it gets is released before (the
// Release's error is sent, if any), so nothing outlives the test; if held is not
// nil and still holds when Acquire returns a lease, an error says so.
func acquireInBackground(ctx context.Context, s *Session, name string, held *Lease) <-chan error {
	out := make(chan error, 1)
	go func() {
		l, err := Acquire(ctx, s, name)
		if err == nil && held != nil && held.Err() == nil {
			err = fmt.Errorf("acquired %s while %s still holds", name, held.Token())
		}
		if l != nil {
			if rerr := l.Release(ctx); rerr != nil && err == nil {
				err = rerr
			}
		}
		out <- err
	}()
	return out
}

// twoSessions opens two sessions (TTL testTTL) of the test's tenant on one
// client of the test's etcd: a holder and its rival.
func twoSessions(t testing.TB) (*clientv3.Client, *Session, *Session) {
	t.Helper()
	cli := coordtest.Etcd(t).Client(t)
	cfg := Config{Tenant: coordtest.Tenant(t), TTL: testTTL}
	return cli, newSession(t, cli, cfg), newSession(t, cli, cfg)
}

// interceptedClient returns a client of e (2 s dial timeout, closed when the
// test ends, after the sessions opened on it) whose unary RPCs go through unary:
// the faults a test injects on the way to etcd.
func interceptedClient(t testing.TB, e *coordtest.EtcdServer, unary grpc.UnaryClientInterceptor) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   e.Endpoints,
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// proxiedSession opens a session (TTL testTTL) whose client reaches etcd
// through a proxy the test can blackhole.
func proxiedSession(t testing.TB) (*Session, *coordtest.Proxy) {
	t.Helper()
	e := coordtest.Etcd(t)
	proxy := coordtest.NewProxy(t, strings.TrimPrefix(e.Endpoints[0], "http://"))
	cli := coordtest.NewEtcdClient(t, proxy.URL())
	return newSession(t, cli, Config{Tenant: coordtest.Tenant(t), TTL: testTTL}), proxy
}

func clientv3WithPrefix() clientv3.OpOption { return clientv3.WithPrefix() }

// metricPoint is one data point collected from a ManualReader: of a Sum[int64]
// (n is its value) or of a Histogram[float64] (n is its count).
type metricPoint struct {
	name  string
	attrs attribute.Set
	n     int64
	hist  bool
}

// metricPoints collects r and returns every data point of its sums and
// histograms.
func metricPoints(t testing.TB, r *sdkmetric.ManualReader) []metricPoint {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []metricPoint
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					out = append(out, metricPoint{name: m.Name, attrs: dp.Attributes, n: dp.Value})
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					out = append(out, metricPoint{name: m.Name, attrs: dp.Attributes, n: int64(dp.Count), hist: true})
				}
			}
		}
	}
	return out
}

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
