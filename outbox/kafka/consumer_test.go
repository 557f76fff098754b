package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/outbox/kafka"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// groupFixture: a kfake cluster, records produced with known offsets, an inbox
// and an effects table, and a watch on every offset commit the cluster receives.
type groupFixture struct {
	t       *testing.T
	cluster *kfake.Cluster
	db      *coordtest.PostgresDB
	in      *outbox.Inbox

	mu       sync.Mutex
	ids      map[int32][]string // partition → event id at each offset
	distinct map[string]bool
	dead     []string // event ids given up: committed past without an inbox row

	commits, early atomic.Int64 // offset commits seen; commits past a record whose effect had not committed
	joins, leaves  atomic.Int64 // JoinGroup and LeaveGroup requests the cluster received
	orderBroken    atomic.Int64
	tries          sync.Map // event id → handler calls
}

func newGroupFixture(t *testing.T, partitions int) *groupFixture {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), "orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	db := coordtest.Postgres(t)
	ctx := context.Background()
	in, err := outbox.NewInbox(outbox.InboxConfig{Table: "inbox"})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE effects (event_id text PRIMARY KEY, key text NOT NULL, n int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	f := &groupFixture{t: t, cluster: cluster, db: db, in: in, ids: map[int32][]string{}, distinct: map[string]bool{}}
	// Every offset commit: each record below the committed offset must already
	// have its inbox row committed (consumer "effects").
	cluster.ControlKey(int16(kmsg.OffsetCommit), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.OffsetCommitRequest)
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				f.commits.Add(1)
				f.mu.Lock()
				below := append([]string(nil), f.ids[rp.Partition][:min(int(rp.Offset), len(f.ids[rp.Partition]))]...)
				dead := append([]string(nil), f.dead...)
				f.mu.Unlock()
				var missing int
				if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM unnest($1::text[]) id
WHERE NOT EXISTS (SELECT 1 FROM inbox WHERE consumer = 'effects' AND event_id = id) AND id <> ALL($2)`, below, dead).Scan(&missing); err == nil && missing > 0 {
					f.early.Add(1)
					t.Errorf("offset %d committed on partition %d with %d records below it not yet committed", rp.Offset, rp.Partition, missing)
				}
			}
		}
		return nil, nil, false
	})
	cluster.ControlKey(int16(kmsg.JoinGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		f.joins.Add(1)
		return nil, nil, false
	})
	cluster.ControlKey(int16(kmsg.LeaveGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		f.leaves.Add(1)
		return nil, nil, false
	})
	return f
}

// produce writes events key:n for n in [from, to) of each key, every dupEvery-th
// one twice (same event id: a re-publication), and records their offsets.
func (f *groupFixture) produce(keys []string, from, to, dupEvery int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.cluster.ListenAddrs()...))
	if err != nil {
		f.t.Fatal(err)
	}
	defer cl.Close()
	pub := newPublisher(f.t, cl, kafka.Config{})
	var recs []*kgo.Record
	i := 0
	for n := from; n < to; n++ {
		for _, k := range keys {
			m := outbox.Message{ID: outbox.NewID(time.Now()), Topic: "orders", Key: k, Type: "t", Payload: fmt.Appendf(nil, "%s:%d", k, n)}
			recs = append(recs, pub.Record(m))
			if i++; dupEvery > 0 && i%dupEvery == 0 {
				recs = append(recs, pub.Record(m))
			}
		}
	}
	// One record at a time, so offsets are known in order per partition.
	for _, r := range recs {
		res := cl.ProduceSync(context.Background(), r)
		if err := res.FirstErr(); err != nil {
			f.t.Fatal(err)
		}
		f.mu.Lock()
		id := string(r.Headers[0].Value)
		for int64(len(f.ids[r.Partition])) < r.Offset { // never: offsets are dense here
			f.ids[r.Partition] = append(f.ids[r.Partition], "")
		}
		f.ids[r.Partition] = append(f.ids[r.Partition], id)
		f.distinct[id] = true
		f.mu.Unlock()
	}
}

func (f *groupFixture) events() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.distinct)
}

func (f *groupFixture) effects() int {
	var n int
	if err := f.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM effects`).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// handler applies key:n, checking per-key order (n follows n-1), after fail
// (may be nil) lets it.
func (f *groupFixture) handler(fail func(rec *kgo.Record, try int) error) func(context.Context, pgx.Tx, *kgo.Record) error {
	return func(ctx context.Context, tx pgx.Tx, rec *kgo.Record) error {
		id := string(rec.Headers[0].Value)
		v, _ := f.tries.LoadOrStore(id, new(atomic.Int64))
		try := int(v.(*atomic.Int64).Add(1))
		if fail != nil {
			if err := fail(rec, try); err != nil {
				return err
			}
		}
		k, ns, _ := strings.Cut(string(rec.Value), ":")
		n, _ := strconv.Atoi(ns)
		var last int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(n), -1) FROM effects WHERE key = $1`, k).Scan(&last); err != nil {
			return err
		}
		if n != last+1 {
			f.orderBroken.Add(1)
			f.t.Errorf("key %s: effect %d after %d", k, n, last)
		}
		_, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1, $2, $3)`, id, k, n)
		return err
	}
}

func (f *groupFixture) consumer(handler func(context.Context, pgx.Tx, *kgo.Record) error, opts ...kgo.Opt) *kafka.Consumer {
	cfg := kafka.ConsumerConfig{Name: "effects", DB: f.db.Pool, Inbox: f.in, Handler: handler, MaxDeliveries: 4,
		Backoff: coord.Backoff{Base: 5 * time.Millisecond, Cap: 20 * time.Millisecond}}
	c, err := kafka.NewConsumer(cfg, append([]kgo.Opt{kgo.SeedBrokers(f.cluster.ListenAddrs()...), kgo.ConsumerGroup("effects"),
		kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.HeartbeatInterval(100 * time.Millisecond), kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// start runs c; the returned stop cancels it and waits for Run.
func start(t *testing.T, c *kafka.Consumer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("Run did not return within 30 s of its context being cancelled")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// Consumers join and leave the group while records flow; handlers fail some
// first tries (retried in place) and the topic holds re-published duplicates.
// Every event has exactly one effect, in per-key order, and no offset is ever
// committed past a record whose inbox transaction had not committed.
func TestKafkaConsumerEffectivelyOnceAcrossRebalances(t *testing.T) {
	res := coordtest.NewResult(t, "kafka consumer group: members join and leave while records flow",
		coordtest.Faults("JoinGroup requests", "LeaveGroup requests", "rebalances that revoked partitions", "handler first tries failed"))
	defer coordtest.Report(t, res)
	f := newGroupFixture(t, 4)
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"}
	var failed atomic.Int64
	h := f.handler(func(rec *kgo.Record, try int) error {
		if try == 1 && rec.Value[len(rec.Value)-1]%5 == 0 {
			failed.Add(1)
			return errors.New("transient")
		}
		time.Sleep(time.Millisecond)
		return nil
	})
	f.produce(keys, 0, 30, 7)
	var cs []*kafka.Consumer
	add := func() func() { c := f.consumer(h); cs = append(cs, c); return start(t, c) }
	stop1 := add()
	coordtest.Until(t, 60*time.Second, 20*time.Millisecond, "a quarter of the effects", func() bool { return f.effects() >= f.events()/4 })
	stop2 := add()
	f.produce(keys, 30, 60, 7)
	coordtest.Until(t, 60*time.Second, 20*time.Millisecond, "half of the effects", func() bool { return f.effects() >= f.events()/2 })
	stop1()
	add()
	f.produce(keys, 60, 90, 7)
	coordtest.Until(t, 60*time.Second, 20*time.Millisecond, "three quarters of the effects", func() bool { return f.effects() >= 3*f.events()/4 })
	stop2()
	coordtest.Until(t, 60*time.Second, 20*time.Millisecond, "every effect", func() bool { return f.effects() == f.events() })
	for _, c := range cs {
		res.Faults["rebalances that revoked partitions"] += int(c.Stats().Revoked)
	}
	res.Faults["JoinGroup requests"] = int(f.joins.Load())
	res.Faults["LeaveGroup requests"] = int(f.leaves.Load())
	res.Faults["handler first tries failed"] = int(failed.Load())
	res.Trials = f.events()
	res.Outcome["events"] = int64(f.events())
	res.Outcome["effects"] = int64(f.effects())
	res.Outcome["offset commits"] = f.commits.Load()
	res.Outcome["commits ahead of the inbox"] = f.early.Load()
	res.Outcome["per-key order violations"] = f.orderBroken.Load()
	t.Logf("events %d, effects %d, rebalances %d, failed first tries %d, commits %d (ahead of the inbox: %d)",
		f.events(), f.effects(), res.Faults["rebalances that revoked partitions"], failed.Load(), f.commits.Load(), f.early.Load())
	switch {
	case f.effects() != f.events():
		t.Fatalf("%d effects for %d events", f.effects(), f.events())
	case f.commits.Load() == 0:
		t.Fatal("no offset was committed")
	}
}

// A rebalance that arrives while a poll is in hand stops it at the next record
// boundary: the handled records are committed, the rest rewound and handled —
// once — by whoever owns the partition next.
func TestKafkaConsumerYieldsToARebalance(t *testing.T) {
	f := newGroupFixture(t, 2)
	f.produce([]string{"a", "b", "c", "d"}, 0, 40, 0)
	release := make(chan struct{})
	var blocked atomic.Bool
	slow := f.handler(func(rec *kgo.Record, try int) error {
		if string(rec.Value) == "a:5" && blocked.CompareAndSwap(false, true) {
			<-release // the poll in hand is held here while the second member joins
		}
		return nil
	})
	c1 := f.consumer(slow)
	start(t, c1)
	coordtest.Until(t, 60*time.Second, 20*time.Millisecond, "the first member holding a record", blocked.Load)
	c2 := f.consumer(f.handler(nil))
	start(t, c2)
	time.Sleep(time.Second) // the join is pending now, blocked by c1's poll
	close(release)
	coordtest.Until(t, 60*time.Second, 20*time.Millisecond, "every effect", func() bool { return f.effects() == f.events() })
	s1 := c1.Stats()
	t.Logf("first member: %+v; second: %+v; commits %d", s1, c2.Stats(), f.commits.Load())
	if s1.Interrupted == 0 {
		t.Fatal("the first member finished its whole poll before yielding to the rebalance")
	}
	if s1.Revoked == 0 {
		t.Fatal("no partition was revoked from the first member")
	}
}

// A record whose handler always fails is tried MaxDeliveries times in place,
// dead-lettered with a *HandlerError, and the partition moves on past it.
func TestKafkaConsumerDeadLettersPoison(t *testing.T) {
	f := newGroupFixture(t, 1)
	f.produce([]string{"a"}, 0, 5, 0)
	var mu sync.Mutex
	var dead []error
	var poisonTries int
	cfg := kafka.ConsumerConfig{Name: "effects", DB: f.db.Pool, Inbox: f.in, MaxDeliveries: 4,
		Backoff: coord.Backoff{Base: time.Millisecond, Cap: 2 * time.Millisecond},
		Handler: func(ctx context.Context, tx pgx.Tx, rec *kgo.Record) error {
			if string(rec.Value) == "a:2" {
				mu.Lock()
				poisonTries++
				mu.Unlock()
				return errors.New("cannot apply")
			}
			_, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1, 'a', 0)`, string(rec.Headers[0].Value))
			return err
		},
		DeadLetter: func(_ context.Context, rec *kgo.Record, cause error) error {
			mu.Lock()
			dead = append(dead, cause)
			mu.Unlock()
			f.mu.Lock()
			f.dead = append(f.dead, string(rec.Headers[0].Value))
			f.mu.Unlock()
			return nil
		}}
	c, err := kafka.NewConsumer(cfg, kgo.SeedBrokers(f.cluster.ListenAddrs()...), kgo.ConsumerGroup("effects"),
		kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	coordtest.Until(t, 60*time.Second, 20*time.Millisecond, "the four other records applied", func() bool { return f.effects() == 4 })
	stop()
	mu.Lock()
	defer mu.Unlock()
	var he *outbox.HandlerError
	if poisonTries != 4 || len(dead) != 1 || !errors.As(dead[0], &he) || he.Delivery != 4 {
		t.Fatalf("poison tried %d times, dead letters %v; want 4 tries and one *HandlerError at delivery 4", poisonTries, dead)
	}
	if f.commits.Load() == 0 {
		t.Fatal("no offset committed")
	}
}

// A consumer of a topic that does not exist, and a relay whose publisher declares
// one, fail at start, naming it (outbox.ErrNoDestination). A consumer without a
// group is a configuration error.
func TestKafkaFailsFastOnMissingTopic(t *testing.T) {
	f := newGroupFixture(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := kafka.ConsumerConfig{Name: "effects", DB: f.db.Pool, Inbox: f.in, Handler: f.handler(nil)}
	c, err := kafka.NewConsumer(cfg, kgo.SeedBrokers(f.cluster.ListenAddrs()...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("orders", "no-such-topic"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(ctx); !errors.Is(err, outbox.ErrNoDestination) || !strings.Contains(err.Error(), `"no-such-topic"`) {
		t.Fatalf("consumer Run = %v, want ErrNoDestination naming no-such-topic", err)
	}
	if _, err := kafka.NewConsumer(cfg, kgo.SeedBrokers(f.cluster.ListenAddrs()...), kgo.ConsumeTopics("orders")); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("consumer without a group: %v", err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(f.cluster.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ob, _ := outbox.New(outbox.Config{Table: "ob"})
	if err := ob.Migrate(ctx, f.db.Pool); err != nil {
		t.Fatal(err)
	}
	r, _ := ob.NewRelay(f.db.Pool, newPublisher(t, prod, kafka.Config{Topics: []string{"orders", "no-such-topic"}}))
	if err := r.Run(ctx); !errors.Is(err, outbox.ErrNoDestination) || !strings.Contains(err.Error(), `"no-such-topic"`) {
		t.Fatalf("relay Run = %v, want ErrNoDestination naming no-such-topic", err)
	}
}
