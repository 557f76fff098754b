package natsjs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/outbox/natsjs"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// Pull and push: every committed event has exactly one effect although the
// handler fails the first delivery of every 7th message (nak with backoff,
// redelivered) and the stream receives every event twice (re-published after
// the duplicate window: the inbox skips the second). Metrics count what happened.
func TestConsumerEffectivelyOnce(t *testing.T) {
	for _, kind := range []string{"pull", "push"} {
		t.Run(kind, func(t *testing.T) {
			f := newConsumerFixture(t, 100*time.Millisecond)
			keys := []string{"a", "b", "c"}
			ids := f.enqueue(keys, 0, 40)
			f.relay()
			var mu sync.Mutex
			deliveries := map[string]int{}
			var failed atomic.Int64
			tm := f.tm
			cfg := f.config(f.effect(func(msg jetstream.Msg) error {
				id := msg.Headers().Get(outbox.HeaderEventID)
				mu.Lock()
				defer mu.Unlock()
				deliveries[id]++
				if id[len(id)-1]%7 == 0 && deliveries[id] == 1 {
					failed.Add(1)
					return errors.New("transient")
				}
				return nil
			}))
			var c *natsjs.Consumer
			var err error
			if kind == "pull" {
				c, err = natsjs.NewConsumer(f.pull("effects", nil), cfg)
			} else {
				pc, perr := f.js.CreateOrUpdatePushConsumer(context.Background(), f.stream, jetstream.ConsumerConfig{
					Durable: "effects", DeliverSubject: nats.NewInbox(), AckPolicy: jetstream.AckExplicitPolicy, AckWait: 10 * time.Second})
				if perr != nil {
					t.Fatal(perr)
				}
				c, err = natsjs.NewPushConsumer(pc, cfg)
			}
			if err != nil {
				t.Fatal(err)
			}
			stop := run(t, c)
			coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "every event applied", func() bool { return f.effects() == len(ids) })
			// Publish everything again, past the 100 ms duplicate window.
			time.Sleep(150 * time.Millisecond)
			if _, err := f.db.Pool.Exec(context.Background(), `UPDATE ob SET published_at = NULL`); err != nil {
				t.Fatal(err)
			}
			coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "the re-publication skipped", func() bool {
				return tm.sum("coordkit.outbox.inbox.duplicates") >= float64(len(ids))
			})
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if n := f.effects(); n != len(ids) {
				t.Fatalf("%d effects for %d events", n, len(ids))
			}
			t.Logf("events %d, first deliveries failed %d, processed %v, duplicates %v, redeliveries %v, handler failures %v",
				len(ids), failed.Load(), tm.sum("coordkit.outbox.consumer.processed"), tm.sum("coordkit.outbox.inbox.duplicates"),
				tm.sum("coordkit.outbox.consumer.redeliveries"), tm.sum("coordkit.outbox.consumer.handler_failures"))
			switch {
			case failed.Load() == 0:
				t.Fatal("no delivery failed: the redelivery path was not exercised")
			case tm.sum("coordkit.outbox.consumer.processed") != float64(len(ids)):
				t.Fatalf("processed %v, want %d", tm.sum("coordkit.outbox.consumer.processed"), len(ids))
			case tm.sum("coordkit.outbox.consumer.handler_failures") != float64(failed.Load()):
				t.Fatalf("handler failures %v, want %d", tm.sum("coordkit.outbox.consumer.handler_failures"), failed.Load())
			case tm.sum("coordkit.outbox.consumer.redeliveries") < float64(failed.Load()):
				t.Fatalf("redeliveries %v < failures %d", tm.sum("coordkit.outbox.consumer.redeliveries"), failed.Load())
			}
		})
	}
}

// A message whose handler always fails is delivered exactly MaxDeliveries times,
// handed to DeadLetter with a *HandlerError, terminated (never delivered again),
// and the other messages are processed. A message without an event id is
// dead-lettered at its first delivery.
func TestConsumerDeadLettersPoison(t *testing.T) {
	f := newConsumerFixture(t, time.Minute)
	ids := f.enqueue([]string{"good", "poison"}, 0, 5)
	f.relay()
	// A message from somewhere else, without an event id.
	if _, err := f.js.Publish(context.Background(), f.prefix+".orders", []byte("stranger:0")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	poisonDeliveries := 0
	var dead []error
	tm := f.tm
	cfg := f.config(f.effect(func(msg jetstream.Msg) error {
		if strings.HasPrefix(string(msg.Data()), "poison:0") {
			mu.Lock()
			poisonDeliveries++
			mu.Unlock()
			return errors.New("cannot apply")
		}
		return nil
	}))
	cfg.DeadLetter = func(_ context.Context, msg jetstream.Msg, cause error) error {
		mu.Lock()
		defer mu.Unlock()
		dead = append(dead, cause)
		return nil
	}
	c, err := natsjs.NewConsumer(f.pull("effects", nil), cfg)
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)
	// Everything but poison:0 is applied (the poison key's later events are
	// separate messages: JetStream does not block them).
	coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "the other events applied and two messages dead-lettered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return f.effects() == len(ids)-1 && len(dead) == 2
	})
	time.Sleep(300 * time.Millisecond) // a terminated message must not come back
	mu.Lock()
	defer mu.Unlock()
	if poisonDeliveries != 5 {
		t.Fatalf("poison delivered %d times, want MaxDeliveries = 5", poisonDeliveries)
	}
	var he *outbox.HandlerError
	var missing int
	for _, e := range dead {
		if errors.As(e, &he) && he.Delivery != 5 {
			t.Fatalf("dead-lettered at delivery %d", he.Delivery)
		}
		if errors.Is(e, outbox.ErrMissingEventID) {
			missing++
		}
	}
	if he == nil || missing != 1 {
		t.Fatalf("dead letters %v: want one *HandlerError and one ErrMissingEventID", dead)
	}
	if got := tm.sum("coordkit.outbox.consumer.dead_lettered"); got != 2 {
		t.Fatalf("dead_lettered %v", got)
	}
}

// If dead-lettering fails, the message is not terminated: it is retried until
// DeadLetter succeeds.
func TestConsumerKeepsAMessageItCouldNotDeadLetter(t *testing.T) {
	f := newConsumerFixture(t, time.Minute)
	f.enqueue([]string{"poison"}, 0, 1)
	f.relay()
	var calls atomic.Int64
	tm := f.tm
	cfg := f.config(f.effect(func(jetstream.Msg) error { return errors.New("cannot apply") }))
	cfg.MaxDeliveries = 2
	cfg.DeadLetter = func(context.Context, jetstream.Msg, error) error {
		if calls.Add(1) < 3 {
			return errors.New("dead-letter queue unavailable")
		}
		return nil
	}
	c, _ := natsjs.NewConsumer(f.pull("effects", nil), cfg)
	run(t, c)
	coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "dead-lettered on the third try", func() bool { return tm.sum("coordkit.outbox.consumer.dead_lettered") == 1 })
	if calls.Load() != 3 {
		t.Fatalf("DeadLetter called %d times", calls.Load())
	}
}

// Run refuses, at start and naming them, a consumer that does not exist and
// consumers configured so that it could not keep its promises.
func TestConsumerFailsFastOnMisconfiguration(t *testing.T) {
	f := newConsumerFixture(t, time.Minute)
	cfg := f.config(f.effect(nil))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	check := func(name string, c jetstream.Consumer, want error, mention string) {
		t.Helper()
		nc, err := natsjs.NewConsumer(c, cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = nc.Run(ctx)
		if !errors.Is(err, want) || !strings.Contains(err.Error(), mention) {
			t.Fatalf("%s: Run = %v, want %v naming %q", name, err, want, mention)
		}
	}
	check("ack none", f.pull("acknone", func(c *jetstream.ConsumerConfig) { c.AckPolicy = jetstream.AckNonePolicy }), natsjs.ErrUnsuitableConsumer, `"acknone"`)
	check("max deliver", f.pull("maxdeliver", func(c *jetstream.ConsumerConfig) { c.MaxDeliver = 3 }), natsjs.ErrUnsuitableConsumer, "MaxDeliver 3")
	gone := f.pull("gone", nil)
	if err := f.js.DeleteConsumer(ctx, f.stream, "gone"); err != nil {
		t.Fatal(err)
	}
	check("deleted", gone, jetstream.ErrConsumerNotFound, "consumer info")
	if _, err := natsjs.NewConsumer(f.pull("x", nil), natsjs.ConsumerConfig{Name: "x"}); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("missing DB/Inbox/Handler: %v", err)
	}
}

// Cancelling Run while a handler is in its transaction returns promptly, with
// nothing committed or acknowledged for that message; it and the buffered ones
// are handed back, so the next Run processes them, once, without waiting for
// AckWait.
func TestConsumerStopsCleanly(t *testing.T) {
	f := newConsumerFixture(t, time.Minute)
	f.enqueue([]string{"k"}, 0, 3)
	f.relay()
	entered := make(chan struct{}, 10)
	blocking := func(ctx context.Context, tx pgx.Tx, msg jetstream.Msg) error {
		if string(msg.Data()) == "k:1" {
			entered <- struct{}{}
			<-ctx.Done() // a slow effect, interrupted
			return ctx.Err()
		}
		return f.effect(nil)(ctx, tx, msg)
	}
	// AckWait one minute: the next run gets the messages because they were
	// handed back, not because the server gave up waiting for an ack.
	ackWait := func(c *jetstream.ConsumerConfig) { c.AckWait = time.Minute }
	c, _ := natsjs.NewConsumer(f.pull("effects", ackWait), f.config(blocking))
	stop := run(t, c)
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler never got k:1")
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := f.effects(); n != 1 {
		t.Fatalf("%d effects after the stop, want only k:0", n)
	}
	c2, _ := natsjs.NewConsumer(f.pull("effects", ackWait), f.config(f.effect(nil)))
	run(t, c2)
	coordtest.Until(t, 20*time.Second, 20*time.Millisecond, "k:1 and k:2 applied by the next run (handed back, well before AckWait)", func() bool { return f.effects() == 3 })
}

// A relay whose publisher declares a subject no stream captures does not start:
// Run returns ErrNoDestination naming the subject. A message for such a subject
// fails with an error naming it (what the parked event's last_error shows).
func TestRelayFailsFastOnMissingStream(t *testing.T) {
	f := newConsumerFixture(t, time.Minute)
	pub := newPublisher(t, f.js, natsjs.Config{Subjects: []string{f.prefix + ".orders", "nostream.orders"}})
	r, _ := f.ob.NewRelay(f.db.Pool, pub)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := r.Run(ctx)
	if !errors.Is(err, outbox.ErrNoDestination) || !strings.Contains(err.Error(), `"nostream.orders"`) {
		t.Fatalf("Run = %v, want ErrNoDestination naming nostream.orders", err)
	}
	errs := newPublisher(t, f.js, natsjs.Config{}).Publish(ctx, []outbox.Message{{ID: outbox.NewID(time.Now()), Topic: "nostream.orders", Key: "k", Type: "t"}})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `subject "nostream.orders"`) {
		t.Fatalf("publish to a subject without a stream: %v", errs)
	}
	t.Logf("start: %v; publish: %v", err, errs[0])
}
