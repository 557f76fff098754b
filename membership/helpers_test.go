package membership_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/coordkit/coordkit/membership"
)

// testTenant returns a tenant name unique to the test.
func testTenant(t testing.TB) string {
	n := strings.NewReplacer("/", "-", " ", "-", "#", "-").Replace(t.Name())
	if len(n) > 40 {
		n = n[len(n)-40:]
	}
	return "t-" + strings.Trim(n, "-")
}

// testLogger logs through t.Log at Info and above (shown on failure only).
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// logBuffer keeps a logger's output, to print for a failing instance only.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// quiet is a logger for tests with many instances.
var quiet = slog.New(slog.DiscardHandler)

// metrics is an OpenTelemetry SDK meter provider read on demand.
type metrics struct {
	*sdkmetric.MeterProvider
	reader *sdkmetric.ManualReader
	t      testing.TB
}

func newMetrics(t testing.TB) *metrics {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return &metrics{MeterProvider: mp, reader: r, t: t}
}

// sum returns the total of every data point of an int64 counter or gauge named
// name whose attributes include match.
func (m *metrics) sum(name string, match ...attribute.KeyValue) int64 {
	m.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := m.reader.Collect(context.Background(), &rm); err != nil {
		m.t.Fatal(err)
	}
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != name {
				continue
			}
			var points []metricdata.DataPoint[int64]
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				points = d.DataPoints
			case metricdata.Gauge[int64]:
				points = d.DataPoints
			}
			for _, p := range points {
				ok := true
				for _, kv := range match {
					if v, found := p.Attributes.Value(kv.Key); !found || v != kv.Value {
						ok = false
					}
				}
				if ok {
					total += p.Value
				}
			}
		}
	}
	return total
}

// rpcCounter counts LeaseKeepAlive streams (one per KeepAliveOnce) on a client.
type rpcCounter struct{ keepalives atomic.Int64 }

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

// register registers cfg (with a test logger unless set) and deregisters it
// when the test ends.
func register(t testing.TB, cli *clientv3.Client, cfg membership.Config) *membership.Registration {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := membership.Register(ctx, cli, cfg)
	if err != nil {
		t.Fatalf("Register %s/%s: %v", cfg.Service, cfg.Instance, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.Deregister(ctx)
	})
	return r
}

// watch starts a watcher closed when the test ends.
func watch(t testing.TB, cli *clientv3.Client, tenant, service string, cfg *membership.WatchConfig) *membership.Watcher {
	t.Helper()
	if cfg == nil {
		cfg = &membership.WatchConfig{}
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	w, err := membership.Watch(context.Background(), cli, tenant, service, *cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

// waitFor polls cond every 5 ms and fails the test with what when it is not
// true within d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// get reads one key.
func get(t testing.TB, cli *clientv3.Client, key string) (*clientv3.GetResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return cli.Get(ctx, key)
}

// instances returns the instance names under a service prefix in etcd, with
// their leases, at one revision.
func instances(t testing.TB, cli *clientv3.Client, tenant, service string) (map[string]clientv3.LeaseID, int64) {
	t.Helper()
	prefix := "/tenants/" + tenant + "/members/" + service + "/"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]clientv3.LeaseID{}
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), prefix)] = clientv3.LeaseID(kv.Lease)
	}
	return out, resp.Header.Revision
}
