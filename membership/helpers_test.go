package membership_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// bufferLogger logs into b at Debug and above: an instance's output, to
// print for a failing instance only.
func bufferLogger(b *coordtest.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
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

// register registers cfg (with a test logger unless set) and deregisters it
// when the test ends.
func register(t testing.TB, cli *clientv3.Client, cfg membership.Config) *membership.Registration {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = coordtest.Logger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := membership.Register(ctx, cli, cfg)
	if err != nil {
		t.Fatalf("Register %s/%s: %v", cfg.Service, cfg.Instance, err)
	}
	atEnd(t, r.Deregister)
	return r
}

// sharedSession opens a Session of cfg on cli (with a test logger) and closes
// it when the test ends.
func sharedSession(t testing.TB, cli *clientv3.Client, cfg membership.SessionConfig) *membership.Session {
	t.Helper()
	cfg.Logger = coordtest.Logger(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := membership.NewSession(ctx, cli, cfg)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	atEnd(t, s.Close)
	return s
}

// atEnd calls stop (a Deregister, a Close) with a 5 s context when the test
// ends; its error is not the test's concern any more.
func atEnd(t testing.TB, stop func(context.Context) error) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = stop(ctx)
	})
}

// watch starts a watcher closed when the test ends.
func watch(t testing.TB, cli *clientv3.Client, tenant, service string, cfg *membership.WatchConfig) *membership.Watcher {
	t.Helper()
	if cfg == nil {
		cfg = &membership.WatchConfig{}
	}
	if cfg.Logger == nil {
		cfg.Logger = coordtest.Logger(t)
	}
	w, err := membership.Watch(context.Background(), cli, tenant, service, *cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
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
