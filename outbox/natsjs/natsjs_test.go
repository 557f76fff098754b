package natsjs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/outbox/natsjs"
	"github.com/coordkit/coordkit/testing/coordtest"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
)

// Events go through a relay into a real JetStream stream with the event id as
// Nats-Msg-Id and header, in order per key; publishing the same event again is
// acknowledged as a duplicate and not stored twice.
func TestNatsPublisherRelayAndDedupe(t *testing.T) {
	_, js, stream, prefix := jetStream(t, time.Minute)
	db := coordtest.Postgres(t)
	ctx := context.Background()
	ob, err := outbox.New(outbox.Config{Table: "ob"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	pub := newPublisher(t, js, natsjs.Config{Subject: func(m outbox.Message) string { return prefix + "." + m.Topic }})
	const keys, perKey = 4, 25
	ids := map[string]string{}
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		var es []outbox.Event
		for n := range perKey {
			for k := range keys {
				es = append(es, outbox.Event{Topic: "orders", Key: fmt.Sprintf("k%d", k), Type: "order.updated",
					Payload: []byte(fmt.Sprintf("k%d:%d", k, n)), Headers: map[string]string{"tenant": "acme"}})
			}
		}
		got, err := ob.EnqueueBatchTx(ctx, tx, es)
		for i, id := range got {
			ids[id.String()] = string(es[i].Payload)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := ob.NewRelay(db.Pool, pub)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { r.Run(rctx); close(done) }()
	defer func() { cancel(); <-done }()

	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]int{}
	var got int
	var first jetstream.Msg
	for got < keys*perKey {
		batch, err := cons.Fetch(100, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n0 := got
		for m := range batch.Messages() {
			h := m.Headers()
			id := h.Get(outbox.HeaderEventID)
			if h.Get(jetstream.MsgIDHeader) != id || ids[id] != string(m.Data()) || h.Get("tenant") != "acme" || h.Get(outbox.HeaderEventType) != "order.updated" {
				t.Fatalf("message headers %v data %q", h, m.Data())
			}
			var k string
			var n int
			fmt.Sscanf(string(m.Data()), "k%d:%d", new(int), &n)
			k = string(m.Data()[:2])
			if prev, ok := last[k]; (ok && n != prev+1) || (!ok && n != 0) {
				t.Fatalf("key %s: %d after %d", k, n, prev)
			}
			last[k] = n
			if first == nil {
				first = m
			}
			got++
		}
		if got == n0 {
			t.Fatalf("no progress: %d of %d received", got, keys*perKey)
		}
	}
	// Re-publish the first event: JetStream's duplicate window absorbs it.
	var id outbox.ID
	id, _ = outbox.ParseID(first.Headers().Get(outbox.HeaderEventID))
	if errs := pub.Publish(ctx, []outbox.Message{{ID: id, Topic: "orders", Key: "k0", Type: "order.updated", Payload: first.Data()}}); errs != nil {
		t.Fatal(errs)
	}
	if pub.Duplicates() != 1 {
		t.Fatalf("duplicates acknowledged = %d, want 1", pub.Duplicates())
	}
	info, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if msgs := info.CachedInfo().State.Msgs; msgs != keys*perKey {
		t.Fatalf("stream holds %d messages, want %d", msgs, keys*perKey)
	}
}
