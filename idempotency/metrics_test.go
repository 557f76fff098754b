package idempotency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/idempotency"
)

func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	s, db := newStore(t, idempotency.Config{MeterProvider: mp, WaitTimeout: 50 * time.Millisecond})
	ctx := context.Background()
	key := idempotency.Key{Scope: "acme", ID: "m"}
	s.Do(ctx, key, fp("a"), effect(key, "x"), nil)                            // execution
	s.Do(ctx, key, fp("a"), effect(key, "x"), nil)                            // replay
	if _, err := s.Do(ctx, key, fp("b"), effect(key, "x"), nil); err == nil { // mismatch
		t.Fatal("no mismatch")
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	busy := idempotency.Key{Scope: "acme", ID: "busy"}
	if _, err := s.DoTx(ctx, tx, busy, fp("a"), effect(busy, "x"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Do(ctx, busy, fp("a"), func(context.Context, pgx.Tx) (idempotency.Response, error) {
		return idempotency.Response{}, nil
	}, nil); !errors.Is(err, idempotency.ErrInFlight) { // conflict
		t.Fatalf("busy: %v", err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[m.Name] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[m.Name] += int64(p.Count)
				}
			}
		}
	}
	want := map[string]int64{
		"coordkit.idempotency.executions":    2, // "m" and "busy" (DoTx counts when the effect ran)
		"coordkit.idempotency.replays":       1,
		"coordkit.idempotency.mismatches":    1,
		"coordkit.idempotency.conflicts":     1,
		"coordkit.idempotency.in_flight.age": 1,
	}
	for name, n := range want {
		if got[name] != n {
			t.Errorf("%s = %d, want %d (all: %v)", name, got[name], n, got)
		}
	}
}

func TestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	s, _ := newStore(t, idempotency.Config{TracerProvider: tp})
	ctx := context.Background()
	key := idempotency.Key{Scope: "acme", ID: "span"}
	s.Do(ctx, key, fp("a"), effect(key, "x"), nil)
	s.Do(ctx, key, fp("a"), effect(key, "x"), nil)
	s.Do(ctx, key, fp("b"), effect(key, "x"), nil)
	var got []string
	for _, sp := range rec.Ended() {
		for _, a := range sp.Attributes() {
			if string(a.Key) == coord.AttrOutcome {
				got = append(got, sp.Name()+"="+a.Value.AsString())
			}
		}
	}
	want := []string{"idempotency.Do=executed", "idempotency.Do=replayed", "idempotency.Do=mismatch"}
	if len(got) != len(want) {
		t.Fatalf("spans %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("spans %v, want %v", got, want)
		}
	}
}
