package outbox_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordkit/outbox"
)

// The trace context of the enqueuing context travels in the event's headers.
func TestTraceContextCapturedIntoHeaders(t *testing.T) {
	db, ob := setup(t, outbox.Config{Table: "ob", Propagator: propagation.TraceContext{}})
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:     trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := ev("k", 0)
	e.Headers = map[string]string{"tenant": "acme"}
	if _, err := ob.EnqueueTx(ctx, tx, e); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan outbox.Message, 1)
	r, _ := ob.NewRelay(db.Pool, outbox.PublisherFunc(func(_ context.Context, m outbox.Message) error {
		select {
		case got <- m:
		default:
		}
		return nil
	}))
	runRelays(t, r)
	select {
	case m := <-got:
		want := "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01"
		if m.Headers["traceparent"] != want || m.Headers["tenant"] != "acme" {
			t.Fatalf("headers %v, want traceparent %s and tenant", m.Headers, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not published")
	}
}
