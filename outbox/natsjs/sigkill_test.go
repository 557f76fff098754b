package natsjs_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/outbox/natsjs"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// The child relay: the test binary re-executed with these variables set.
const (
	childEnv       = "OUTBOX_CHILD_RELAY"          // Postgres URL (with search_path)
	childNATSEnv   = "OUTBOX_CHILD_NATS"           // NATS URL
	childPrefixEnv = "OUTBOX_CHILD_PREFIX"         // subject prefix
	publishedLine  = "CHILD PUBLISHED, NOT MARKED" // printed between publish and mark
)

const table = "ob"

func relayConfig() outbox.Config {
	return outbox.Config{Table: table, BatchSize: 25, PollInterval: 20 * time.Millisecond,
		Backoff: coord.Backoff{Base: 10 * time.Millisecond, Cap: 200 * time.Millisecond}}
}

// evidence wraps a publisher: after each successful batch it records every
// event id it published in the attempts table (autocommit, so it survives a
// kill) and then calls after (the child prints and sleeps there: the kill window
// between publish and mark).
type evidence struct {
	inner outbox.Publisher
	db    *pgxpool.Pool
	relay string
	after func()
}

func (e *evidence) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := e.inner.Publish(ctx, msgs)
	var ids []string
	for i, m := range msgs {
		if errs == nil || errs[i] == nil {
			ids = append(ids, m.ID.String())
		}
	}
	if len(ids) > 0 {
		if _, err := e.db.Exec(ctx, `INSERT INTO attempts (event_id, relay) SELECT unnest($1::text[]), $2`, ids, e.relay); err != nil {
			fmt.Fprintln(os.Stderr, "evidence:", err)
		}
		if e.after != nil {
			e.after()
		}
	}
	return errs
}

func runChildRelay() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv(childEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer pool.Close()
	nc, err := nats.Connect(os.Getenv(childNATSEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	prefix := os.Getenv(childPrefixEnv)
	ob, _ := outbox.New(relayConfig())
	inner, err := natsjs.New(js, natsjs.Config{Subject: func(m outbox.Message) string { return prefix + "." + m.Topic }})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	pub := &evidence{inner: inner,
		db: pool, relay: "child", after: func() {
			// Outlive JetStream's 100 ms duplicate window first, so the other
			// relay's re-publication reaches the consumer and the inbox must
			// drop it; then announce, and wait to be killed.
			time.Sleep(150 * time.Millisecond)
			fmt.Println(publishedLine)
			time.Sleep(300 * time.Millisecond) // the parent kills us here
		}}
	r, _ := ob.NewRelay(pool, pub)
	if err := r.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// Two relays — one in this process, one a child process that is SIGKILLed
// between publishing a batch and marking it, again and again — publish to a real
// JetStream stream while producers keep writing, and the natsjs consumer helper,
// restarted every 400 ms, applies the events. The stream's duplicate window is
// tiny, so re-published events reach the consumer, and the inbox is what keeps
// its effects exactly-once. Asserted: every committed event has exactly one
// effect (0 lost, 0 doubled), duplicates were published and skipped (counted),
// per-key order of effects never broke, and the kills and restarts happened.
func TestSIGKILLedRelayBetweenPublishAndMark(t *testing.T) {
	res := coordtest.NewResult(t, "two relays, one SIGKILLed between publish and mark, JetStream + inbox", coordtest.Faults("SIGKILL between publish and mark", "process kills", "consumer restarts"))
	defer coordtest.Report(t, res)
	kills := coordtest.Pick(20, 100)
	natsURL, js, stream, prefix := jetStream(t, 100*time.Millisecond) // the server minimum; kills come 300 ms after publishing
	db := coordtest.Postgres(t)
	ctx := context.Background()
	tm := newCountingMeter()
	ob, in := outboxAndInbox(t, db.Pool, relayConfig(), outbox.InboxConfig{Table: "inbox", MeterProvider: tm})
	for _, q := range []string{
		`CREATE TABLE attempts (event_id text NOT NULL, relay text NOT NULL)`,
		`CREATE TABLE effects (key text NOT NULL, n int NOT NULL, PRIMARY KEY (key, n))`,
	} {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}

	// Producers: 12 keys, events numbered per key.
	const keys = 12
	var stopping atomic.Bool // not a context: a cancelled commit could commit unseen
	var produced atomic.Int64
	var pwg sync.WaitGroup
	for p := range 3 {
		pwg.Go(func() {
			next := map[string]int{}
			for i := 0; !stopping.Load(); i++ {
				key := fmt.Sprintf("p%dk%d", p, i%(keys/3))
				n := next[key]
				err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
					_, err := ob.EnqueueTx(ctx, tx, outbox.Event{Topic: "orders", Key: key, Type: "order.updated", Payload: []byte(key + ":" + strconv.Itoa(n))})
					return err
				})
				if err != nil {
					t.Errorf("producer: %v", err)
					return
				}
				next[key] = n + 1
				produced.Add(1)
				time.Sleep(2 * time.Millisecond)
			}
		})
	}

	// Consumers: the natsjs helper over a durable pull consumer (MaxAckPending
	// 1: the order of effects holds across restarts), restarted every 400 ms
	// while the kills go on — each restart hands back what it held.
	durable, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "effects",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxAckPending: 1})
	if err != nil {
		t.Fatal(err)
	}
	var violations atomic.Int64
	handler := func(ctx context.Context, tx pgx.Tx, m jetstream.Msg) error {
		key, ns, _ := strings.Cut(string(m.Data()), ":")
		n, _ := strconv.Atoi(ns)
		var last int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(n), -1) FROM effects WHERE key = $1`, key).Scan(&last); err != nil {
			return err
		}
		if n != last+1 {
			violations.Add(1)
			t.Errorf("order violated at the consumer: key %s effect %d after %d", key, n, last)
		}
		_, err := tx.Exec(ctx, `INSERT INTO effects (key, n) VALUES ($1, $2)`, key, n)
		return err
	}
	consumer, err := natsjs.NewConsumer(durable, natsjs.ConsumerConfig{Name: "effects", DB: db.Pool, Inbox: in, Handler: handler, MeterProvider: tm})
	if err != nil {
		t.Fatal(err)
	}
	var restarts atomic.Int64
	cctx, stopConsumer := context.WithCancel(ctx)
	consumerDone := make(chan struct{})
	// A failed test stops the consumer before it ends (its errors after the end
	// would panic the test binary).
	t.Cleanup(func() { stopConsumer(); <-consumerDone })
	go func() {
		defer close(consumerDone)
		for cctx.Err() == nil {
			rctx, stop := context.WithTimeout(cctx, 400*time.Millisecond)
			if err := consumer.Run(rctx); err != nil {
				t.Errorf("consumer: %v", err)
			}
			stop()
			restarts.Add(1)
		}
	}()

	// The in-process relay (slowed a little so the child always finds work).
	local, _ := ob.NewRelay(db.Pool, &evidence{inner: newPublisher(t, js, natsjs.Config{Subject: func(m outbox.Message) string { return prefix + "." + m.Topic }}),
		db: db.Pool, relay: "local", after: func() { time.Sleep(5 * time.Millisecond) }})
	rctx, stopLocal := context.WithCancel(ctx)
	localDone := make(chan struct{})
	go func() { local.Run(rctx); close(localDone) }()
	t.Cleanup(func() { stopLocal(); <-localDone })

	// The child relay, killed between publish and mark.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	os.Setenv(childEnv, db.URL)
	os.Setenv(childNATSEnv, natsURL)
	os.Setenv(childPrefixEnv, prefix)
	child := coordtest.StartProcess(t, "child relay", self, "-test.run=^$")
	os.Unsetenv(childEnv)
	killsAfterPublish := 0
	for i := range kills {
		if i > 0 {
			os.Setenv(childEnv, db.URL)
			err := child.Start()
			os.Unsetenv(childEnv)
			if err != nil {
				t.Fatal(err)
			}
		}
		child.WaitOutput(t, publishedLine, 60*time.Second)
		child.Kill()
		killsAfterPublish++
	}
	stopping.Store(true)
	pwg.Wait()

	// Drain with the surviving relay; wait for every committed event's effect
	// while effects keep coming (the consumer applies one at a time: the full
	// tier's ~20,000 events take minutes on a loaded machine), at most a
	// minute without one.
	total := produced.Load()
	var effects int64
	for last, moved := int64(-1), time.Now(); ; time.Sleep(100 * time.Millisecond) {
		db.Pool.QueryRow(ctx, `SELECT count(*) FROM effects`).Scan(&effects)
		if effects != last {
			last, moved = effects, time.Now()
		}
		if effects >= total || time.Since(moved) > time.Minute {
			break
		}
	}
	stopLocal()
	coordtest.Recv(t, localDone, 30*time.Second, "the local relay's Run returning after cancel")
	// Every message in the stream settled (late duplicates included), while
	// the consumer's ack floor moves.
	for floor, moved := uint64(0), time.Now(); ; time.Sleep(100 * time.Millisecond) {
		info, err := durable.Info(ctx)
		if err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
			break
		}
		if err == nil && info.AckFloor.Consumer != floor {
			floor, moved = info.AckFloor.Consumer, time.Now()
		}
		if time.Since(moved) > time.Minute {
			t.Fatalf("the consumer stopped settling the stream (its ack floor did not move for a minute): %+v, %v", info, err)
		}
	}
	stopConsumer()
	coordtest.Recv(t, consumerDone, 30*time.Second, "the consumer returning after cancel")
	db.Pool.QueryRow(ctx, `SELECT count(*) FROM effects`).Scan(&effects)
	processed, dupSkipped := int64(tm.sum("coordkit.outbox.consumer.processed")), int64(tm.sum("coordkit.outbox.inbox.duplicates"))
	failures, dropped := int64(tm.sum("coordkit.outbox.consumer.handler_failures")), int64(tm.sum("coordkit.outbox.consumer.dead_lettered"))

	var pubs, distinct, childPubs int64
	db.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT event_id), count(*) FILTER (WHERE relay = 'child') FROM attempts`).Scan(&pubs, &distinct, &childPubs)
	var pending int64
	db.Pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE published_at IS NULL`).Scan(&pending)
	t.Logf("kills between publish and mark: %d (process kills %d); events committed %d; effects %d; lost %d; "+
		"publications %d for %d distinct events (%d duplicates, %d by the killed child); consumer restarts %d, processed %d, inbox skipped %d duplicates, handler failures %d, dead-lettered %d; order violations %d; unpublished left %d",
		killsAfterPublish, child.Stats().Kills, total, effects, total-effects, pubs, distinct, pubs-distinct, childPubs,
		restarts.Load(), processed, dupSkipped, failures, dropped, violations.Load(), pending)
	res.Trials = int(total)
	res.Faults["SIGKILL between publish and mark"] = int(killsAfterPublish)
	res.Faults["process kills"] = child.Stats().Kills
	res.Faults["consumer restarts"] = int(restarts.Load())
	res.Outcome["events committed"] = int64(total)
	res.Outcome["consumer effects"] = int64(effects)
	res.Outcome["events lost"] = int64(total - effects)
	res.Outcome["duplicates published"] = pubs - distinct
	res.Outcome["duplicates skipped by the inbox"] = dupSkipped
	res.Outcome["consumer handler failures"] = failures
	res.Outcome["dead-lettered"] = dropped
	res.Outcome["per-key order violations"] = violations.Load()
	res.Notes = "trials = events committed; duplicates are publications the killed relay made but never marked, redelivered after JetStream's 100 ms duplicate window; the natsjs consumer helper (durable pull consumer, MaxAckPending 1) is restarted every 400 ms."
	switch {
	case child.Stats().Kills < kills:
		t.Fatalf("only %d kills, want %d", child.Stats().Kills, kills)
	case restarts.Load() < 2:
		t.Fatalf("consumers restarted %d times: the restart path was not exercised", restarts.Load())
	case effects != total || processed != total:
		t.Fatalf("effects %d (processed %d), want exactly %d: lost or doubled", effects, processed, total)
	case failures != 0 || dropped != 0:
		t.Fatalf("%d handler failures, %d dead-lettered: a double effect hit the primary key", failures, dropped)
	case pubs-distinct == 0:
		t.Fatal("no duplicate publication observed: the kill window was not hit")
	case dupSkipped == 0:
		t.Fatal("the inbox never skipped a duplicate delivery")
	case violations.Load() != 0:
		t.Fatalf("%d order violations", violations.Load())
	case pending != 0:
		t.Fatalf("%d events left unpublished", pending)
	}
}
