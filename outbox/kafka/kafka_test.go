package kafka_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/outbox/kafka"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Two relays publish interleaved keys through franz-go's idempotent producer to
// an in-process kfake cluster: every event arrives once or more, keyed by its
// aggregate id, with the event id and type as headers, in order per key. An
// event for a topic that does not exist fails, is retried and parked; the other
// keys are not held up.
func TestKafkaPublisherAgainstKfake(t *testing.T) {
	cluster, prod := ordersCluster(t)

	db := coordtest.Postgres(t)
	ctx := context.Background()
	ob, err := outbox.New(outbox.Config{Table: "ob", MaxAttempts: 2, PollInterval: 20 * time.Millisecond,
		Backoff: coord.Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	const keys, perKey = 6, 30
	var ids = map[string]string{} // event id → "key:n"
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		for n := range perKey {
			for k := range keys {
				body := fmt.Sprintf(`{"key":"k%d","n":%d}`, k, n)
				id, err := ob.EnqueueTx(ctx, tx, outbox.Event{Topic: "orders", Key: fmt.Sprintf("k%d", k), Type: "order.updated", Payload: []byte(body), JSON: true})
				if err != nil {
					return err
				}
				ids[id.String()] = fmt.Sprintf("k%d:%d", k, n)
			}
		}
		_, err := ob.EnqueueTx(ctx, tx, outbox.Event{Topic: "missing-topic", Key: "lost", Type: "x", Payload: []byte("p")})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	pub := newPublisher(t, prod, kafka.Config{})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	var relays []*outbox.Relay
	for range 2 {
		r, _ := ob.NewRelay(db.Pool, pub)
		relays = append(relays, r)
		go func() { r.Run(rctx); done <- struct{}{} }()
	}
	defer func() { cancel(); <-done; <-done }()

	cons, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	last := map[string]int{}
	seen := map[string]bool{}
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < keys*perKey && time.Now().Before(deadline) {
		fctx, fc := context.WithTimeout(ctx, 2*time.Second)
		fs := cons.PollFetches(fctx)
		fc()
		fs.EachRecord(func(r *kgo.Record) {
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			want, ok := ids[h[outbox.HeaderEventID]]
			if !ok || h[outbox.HeaderEventType] != "order.updated" {
				t.Fatalf("record without a known event id/type: %v", h)
			}
			k, ns, _ := strings.Cut(want, ":")
			n, _ := strconv.Atoi(ns)
			if string(r.Key) != k {
				t.Fatalf("record key %q, want %q", r.Key, k)
			}
			if seen[want] {
				return // duplicate (at-least-once)
			}
			if prev, ok := last[k]; (ok && n != prev+1) || (!ok && n != 0) {
				t.Fatalf("key %s: event %d after %d", k, n, prev)
			}
			last[k] = n
			seen[want] = true
		})
	}
	if len(seen) != keys*perKey {
		t.Fatalf("received %d of %d", len(seen), keys*perKey)
	}
	var parked []outbox.ParkedEvent
	coordtest.Until(t, 30*time.Second, 50*time.Millisecond, "the event for a missing topic parked", func() bool {
		p, err := ob.ParkedList(ctx, db.Pool, nil)
		parked = p.Events
		return err == nil && len(parked) == 1 && parked[0].Key == "lost"
	})
	t.Logf("parked after %d attempts: %s", parked[0].Attempts, parked[0].LastError)
	var busy int
	for _, r := range relays {
		if r.Stats().Published > 0 {
			busy++
		}
	}
	t.Logf("received %d distinct events in order; relays that published: %d", len(seen), busy)
}

// newPublisher is kafka.New, failing the test on its error.
func newPublisher(t testing.TB, cl *kgo.Client, cfg kafka.Config) *kafka.Publisher {
	t.Helper()
	p, err := kafka.New(cl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ordersCluster is a one-broker kfake cluster with a three-partition "orders"
// topic, and a producer on it that gives up on an unknown topic after one
// retry; both end with the test.
func ordersCluster(t *testing.T) (*kfake.Cluster, *kgo.Client) {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	prod, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.UnknownTopicRetries(1), kgo.RecordDeliveryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	return cluster, prod
}
