package natsjs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/outbox/natsjs"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// Events go through a relay into a real JetStream stream with the event id as
// Nats-Msg-Id and header, in order per key; publishing the same event again is
// acknowledged as a duplicate and not stored twice.
func TestNatsPublisherRelayAndDedupe(t *testing.T) {
	_, js, stream, prefix := jetStream(t, time.Minute)
	db := coordtest.Postgres(t)
	ctx := context.Background()
	// A table name of its own: relays take their key locks in a class derived
	// from the table's name, shared by every schema on the server, so another
	// test's relay of a table "ob" that holds keys k0..k3 (outbox/kafka's holds
	// them for its 5 s delivery timeout) kept this one from claiming any.
	ob, err := outbox.New(outbox.Config{Table: "ob_" + randomName()})
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
	// The relay's first batch may take a while on a loaded machine (a shared
	// PostgreSQL, a busy nats-server): the test waits for every message up to its
	// own deadline, not for progress within each fetch.
	deadline := time.Now().Add(60 * time.Second)
	for got < keys*perKey {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages received in 60 s; relay %+v", got, keys*perKey, r.Stats())
		}
		batch, err := cons.Fetch(100, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
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
		if err := batch.Error(); err != nil { // the ordered consumer resets itself on the next Fetch
			t.Logf("fetch after %d of %d messages: %v", got, keys*perKey, err)
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
