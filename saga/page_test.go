package saga

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/coordkit/coordkit/testing/coordtest"
)

type pager struct {
	mu    sync.Mutex
	pages []Page
}

func (p *pager) page(_ context.Context, pg Page) {
	p.mu.Lock()
	p.pages = append(p.pages, pg)
	p.mu.Unlock()
}

func (p *pager) get() []Page {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Page(nil), p.pages...)
}

// TestCompensationAlwaysFailsPages: a compensation that always fails pages after
// exactly 3 attempts, the saga goes to needs_human, and the age metric shows it.
func TestCompensationAlwaysFailsPages(t *testing.T) {
	res := coordtest.NewResult(t, "saga compensation always fails: pages once, waits for a human", coordtest.Faults("compensation failed"))
	defer coordtest.Report(t, res)
	e := newEnv(t)
	e.p.compFails = "reserve"
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	pg := &pager{}
	cfg := fastConfig()
	cfg.MeterProvider = mp
	cfg.OnPage = pg.page
	c, def := e.client(t, cfg)
	run(t, c)
	ctx := context.Background()
	id := start(t, ctx, c, def, order{FailAt: "ship"}, nil)
	i := waitState(t, c, id, 30*time.Second, StateNeedsHuman, StateCompensated, StateCompleted)
	if i.State != StateNeedsHuman || i.Attempts != 3 || i.Step != 0 {
		t.Fatalf("saga %+v", i)
	}
	time.Sleep(300 * time.Millisecond) // nothing retries silently
	if n := e.p.callCount("reserve/compensate"); n != 3 {
		t.Fatalf("compensation attempted %d times, want exactly 3", n)
	}
	pages := pg.get()
	if len(pages) != 1 || pages[0].Reason != PageCompensationFailed || pages[0].Attempts != 3 ||
		pages[0].Step != "reserve" || pages[0].SagaID != id {
		t.Fatalf("pages %+v", pages)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	if got := sumCounter(rm, "coordkit.saga.compensation_failures"); got != 3 {
		t.Fatalf("%s = %d, want 3", "coordkit.saga.compensation_failures", got)
	}
	age, ok := gauge(rm, "coordkit.saga.state.age", "order", string(StateNeedsHuman))
	if !ok || age < 0.3 {
		t.Fatalf("%s{needs_human} = %v %v", "coordkit.saga.state.age", age, ok)
	}
	if sumCounter(rm, "coordkit.saga.steps") == 0 || sumCounter(rm, "coordkit.saga.retries") != 2 {
		t.Fatalf("steps %d retries %d", sumCounter(rm, "coordkit.saga.steps"), sumCounter(rm, "coordkit.saga.retries"))
	}
	res.Trials = 1
	res.Faults["compensation failed"] = e.p.callCount("reserve/compensate")
	res.Outcome["pages"] = int64(len(pages))
	res.Outcome["compensation failures counted"] = sumCounter(rm, "coordkit.saga.compensation_failures")
	res.Outcome["retries counted"] = sumCounter(rm, "coordkit.saga.retries")
	res.Outcome["needs_human age ms"] = int64(age * 1000)
	if l, _ := c.List(ctx, &ListOpts{States: []State{StateNeedsHuman}, OlderThan: 100 * time.Millisecond}); len(l) != 1 || l[0].ID != id {
		t.Fatalf("List needs_human = %+v", l)
	}
	// A human fixes the refund API and retries; then it compensates.
	if err := c.Resolve(ctx, id, Resolution("bogus"), "x"); !errors.Is(err, ErrInvalidConfig) {
		t.Fatal(err)
	}
	e.p.mu.Lock()
	e.p.compFails = ""
	e.p.mu.Unlock()
	if err := c.Resolve(ctx, id, ResolveRetry, "refund API fixed (INC-42)"); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, 20*time.Second, StateCompensated)
	res.Outcome["compensated after a human retry"] = 1
	if err := c.Resolve(ctx, id, ResolveRetry, "again"); !errors.Is(err, ErrWrongState) {
		t.Fatalf("resolve a compensated saga: %v", err)
	}
	// The age gauge drops the saga once terminal.
	rm = metricdata.ResourceMetrics{}
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	if _, ok := gauge(rm, "coordkit.saga.state.age", "order", string(StateNeedsHuman)); ok {
		t.Fatal("age gauge still reports a resolved saga")
	}
}

// TestStuckAfterPivotPages: a saga that keeps failing after its pivot pages once
// after StuckAfter, keeps retrying forward, and never compensates.
func TestStuckAfterPivotPages(t *testing.T) {
	e := newEnv(t)
	pg := &pager{}
	cfg := fastConfig()
	cfg.StuckAfter = 300 * time.Millisecond
	cfg.OnPage = pg.page
	c, def := e.client(t, cfg)
	run(t, c)
	id := start(t, context.Background(), c, def, order{FailAt: "receipt"}, nil)
	deadline := time.Now().Add(20 * time.Second)
	for len(pg.get()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no page")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	pages := pg.get()
	if len(pages) != 1 || pages[0].Reason != PageStuckAfterPivot || pages[0].Step != "receipt" {
		t.Fatalf("pages %+v", pages)
	}
	i, _ := c.Get(context.Background(), id)
	if i.State != StateRunning || i.Attempts < 2 {
		t.Fatalf("saga %+v", i)
	}
	if got := effects(t, e.db.Pool, id); got["reserve/compensate"]+got["charge/compensate"] != 0 {
		t.Fatalf("compensated after the pivot: %v", got)
	}
}

func sumCounter(rm metricdata.ResourceMetrics, name string) int64 {
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, dp := range s.DataPoints {
					n += dp.Value
				}
			}
		}
	}
	return n
}

func gauge(rm metricdata.ResourceMetrics, name, typ, state string) (float64, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			g, ok := m.Data.(metricdata.Gauge[float64])
			if !ok || m.Name != name {
				continue
			}
			for _, dp := range g.DataPoints {
				if dp.Attributes.HasValue(attribute.Key("coordkit.saga.type")) {
					ty, _ := dp.Attributes.Value(attribute.Key("coordkit.saga.type"))
					st, _ := dp.Attributes.Value(attribute.Key("coordkit.saga.state"))
					if ty.AsString() == typ && st.AsString() == state {
						return dp.Value, true
					}
				}
			}
		}
	}
	return 0, false
}

// TestResolveSkip: a human undoes the stuck step by hand; the saga goes on
// compensating the steps before it.
func TestResolveSkip(t *testing.T) {
	e := newEnv(t)
	e.p.compFails = "charge"
	pg := &pager{}
	cfg := fastConfig()
	cfg.OnPage = pg.page
	c, def := e.client(t, cfg)
	run(t, c)
	ctx := context.Background()
	id := start(t, ctx, c, def, order{FailAt: "ship"}, nil)
	i := waitState(t, c, id, 30*time.Second, StateNeedsHuman, StateCompensated)
	if i.State != StateNeedsHuman || i.Step != 1 || len(pg.get()) != 1 {
		t.Fatalf("saga %+v pages %d", i, len(pg.get()))
	}
	if err := c.Resolve(ctx, id, ResolveSkip, ""); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("empty note: %v", err)
	}
	if err := c.Resolve(ctx, id, ResolveSkip, "refunded by hand, ticket 7"); err != nil {
		t.Fatal(err)
	}
	i = waitState(t, c, id, 20*time.Second, StateCompensated)
	got := effects(t, e.db.Pool, id)
	if got["reserve/compensate"] != 1 || got["charge/compensate"] != 0 || got["charge/action"] != 1 {
		t.Fatalf("effects %v", got)
	}
	if !strings.Contains(i.LastError, "refunded by hand") {
		t.Fatalf("note not recorded: %q", i.LastError)
	}
}
