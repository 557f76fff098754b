package efficiencylock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/efficiencylock"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// recorder is a MeterProvider that keeps every measurement: name, value, attributes.
type recorder struct {
	noop.MeterProvider
	mu   sync.Mutex
	seen []measurement
}

type measurement struct {
	name  string
	value int64
	attrs attribute.Set
}

func (r *recorder) Meter(string, ...metric.MeterOption) metric.Meter { return recMeter{r: r} }

func (r *recorder) add(name string, v int64, s attribute.Set) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, measurement{name, v, s})
}

// sum adds the values of name whose attributes include every kv.
func (r *recorder) sum(name string, kv ...attribute.KeyValue) (total int64, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.seen {
		if m.name != name {
			continue
		}
		ok := true
		for _, want := range kv {
			if got, has := m.attrs.Value(want.Key); !has || got != want.Value {
				ok = false
			}
		}
		if ok {
			total += m.value
			n++
		}
	}
	return total, n
}

type recMeter struct {
	noop.Meter
	r *recorder
}

func (m recMeter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return recCounter{r: m.r, name: name}, nil
}

func (m recMeter) Int64Histogram(name string, _ ...metric.Int64HistogramOption) (metric.Int64Histogram, error) {
	return recHist{r: m.r, name: name}, nil
}

type recCounter struct {
	noop.Int64Counter
	r    *recorder
	name string
}

func (c recCounter) Add(_ context.Context, v int64, opts ...metric.AddOption) {
	c.r.add(c.name, v, metric.NewAddConfig(opts).Attributes())
}

type recHist struct {
	noop.Int64Histogram
	r    *recorder
	name string
}

func (h recHist) Record(_ context.Context, v int64, opts ...metric.RecordOption) {
	h.r.add(h.name, v, metric.NewRecordConfig(opts).Attributes())
}

func TestMetricsAndLogsCarryTheReason(t *testing.T) {
	t.Parallel()
	db := coordtest.Redis(t)
	rec := &recorder{}
	var logs coordtest.Buffer
	const why = "thumbnail regeneration is idempotent"
	l, err := efficiencylock.New(db.Client, efficiencylock.DuplicatesHarmless(why), efficiencylock.Config{
		Tenant:        db.Tenant,
		MeterProvider: rec,
		Logger:        slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 10*time.Second)
	a, err := l.TryAcquire(ctx, "m", 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, "m", time.Second, &efficiencylock.LockOpts{Retry: efficiencylock.LimitRetry(coord.Backoff{Base: time.Millisecond, Cap: 2 * time.Millisecond}, 2)}); !errors.Is(err, efficiencylock.ErrNotAcquired) {
		t.Fatalf("contended Acquire = %v", err)
	}
	db.Client.Del(ctx, a.Key())
	if err := a.Refresh(ctx, time.Second); !errors.Is(err, efficiencylock.ErrLockLost) {
		t.Fatalf("Refresh of a vanished lock = %v", err)
	}

	reason := attribute.String("coordkit.efficiencylock.reason", why)
	if v, _ := rec.sum("coordkit.efficiencylock.acquisitions", reason, attribute.String(coord.AttrOutcome, "acquired")); v != 1 {
		t.Errorf("%s{acquired} = %d, want 1", "coordkit.efficiencylock.acquisitions", v)
	}
	if v, _ := rec.sum("coordkit.efficiencylock.acquisitions", reason, attribute.String(coord.AttrOutcome, "not_acquired")); v != 1 {
		t.Errorf("%s{not_acquired} = %d, want 1", "coordkit.efficiencylock.acquisitions", v)
	}
	if v, n := rec.sum("coordkit.efficiencylock.attempts", reason); v != 1+3 || n != 2 {
		t.Errorf("%s = %d over %d records, want 4 over 2 (1 + 3 attempts)", "coordkit.efficiencylock.attempts", v, n)
	}
	if v, _ := rec.sum("coordkit.efficiencylock.refresh_failures", reason, attribute.String(coord.AttrReason, "gone")); v != 1 {
		t.Errorf("%s{gone} = %d, want 1", "coordkit.efficiencylock.refresh_failures", v)
	}
	if v, _ := rec.sum("coordkit.efficiencylock.lost", reason, attribute.String(coord.AttrTenant, db.Tenant)); v != 1 {
		t.Errorf("%s = %d, want 1", "coordkit.efficiencylock.lost", v)
	}
	out := logs.String()
	for _, want := range []string{"efficiencylock: acquired", "efficiencylock: lock lost", `coordkit.efficiencylock.reason="` + why + `"`} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %q:\n%s", want, out)
		}
	}
}
