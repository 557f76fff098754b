package outbox_test

// Paths of the relay (relay.go) that the scenario tests reach only by chance or
// not at all: an idle relay's wait, the prune warning, the claim's cut and its
// not-due rows (races forced inside PostgreSQL), a publisher breaking its
// contract, the first retry's delay, the oldest-age gauge, and failure records
// that PostgreSQL refuses. Each kills a mutant of scripts/mutants.sh outbox-relay.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// batchSizes is a recorder that also keeps the size of every Publish call.
type batchSizes struct {
	*recorder
	mu    sync.Mutex
	sizes []int
}

func (b *batchSizes) Publish(ctx context.Context, msgs []outbox.Message) []error {
	b.mu.Lock()
	b.sizes = append(b.sizes, len(msgs))
	b.mu.Unlock()
	return b.recorder.Publish(ctx, msgs)
}

func (b *batchSizes) batches() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.sizes...)
}

// newSequence creates a sequence called prefix_<random> and returns its name.
func newSequence(t *testing.T, ctx context.Context, db *coordtest.PostgresDB, prefix string) string {
	t.Helper()
	seq := fmt.Sprintf("%s_%d", prefix, rand.Uint32())
	if _, err := db.Pool.Exec(ctx, `CREATE SEQUENCE `+seq); err != nil {
		t.Fatal(err)
	}
	return seq
}

// lastValue reads how many times a sequence was advanced (0 before its first nextval).
func lastValue(t *testing.T, db *coordtest.PostgresDB, seq string) int {
	t.Helper()
	return count(t, db.Pool, `SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM `+seq)
}

// The relay's prune loop warns when a prune fails, and only then.
func TestRelayWarnsOnlyWhenAPruneFails(t *testing.T) {
	const warning = "outbox relay: prune failed"
	for _, refused := range []bool{false, true} {
		t.Run(fmt.Sprintf("refused=%v", refused), func(t *testing.T) {
			log := &logged{}
			db, ob := setup(t, outbox.Config{Table: "ob", PollInterval: 20 * time.Millisecond, Retention: time.Millisecond,
				PruneInterval: 20 * time.Millisecond, Logger: slog.New(log)})
			ctx := context.Background()
			if refused {
				// Published rows cannot be deleted; parking (pending rows) could.
				if _, err := db.Pool.Exec(ctx, `CREATE FUNCTION refuse_prune() RETURNS trigger LANGUAGE plpgsql AS $$
					BEGIN RAISE EXCEPTION 'prune refused by the test'; END $$;
					CREATE TRIGGER refuse_prune BEFORE DELETE ON ob FOR EACH ROW WHEN (OLD.published_at IS NOT NULL)
					EXECUTE FUNCTION refuse_prune()`); err != nil {
					t.Fatal(err)
				}
			}
			rec := newRecorder()
			r := newRelay(t, ob, db.Pool, rec)
			runRelays(t, r)
			enqueue(t, db.Pool, ob, ev("k", 0), ev("k", 1))
			coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "the events published", func() bool { return rec.published("k") == 1 })
			if refused {
				coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "a prune warning", func() bool { return len(log.with(warning, "err")) >= 1 })
				if e := log.with(warning, "err")[0].String(); !strings.Contains(e, "prune refused by the test") {
					t.Fatalf("prune warning's err %q, want the trigger's refusal", e)
				}
				return
			}
			coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "the published rows pruned", func() bool { return count(t, db.Pool, `SELECT count(*) FROM ob`) == 0 })
			time.Sleep(100 * time.Millisecond) // a few more (empty) prunes
			if ws := log.with(warning, "err"); len(ws) != 0 {
				t.Fatalf("%d prune warnings for prunes that succeeded (first err %v)", len(ws), ws[0])
			}
		})
	}
}

// Solo and keyed, a batch is at most BatchSize events, per key a prefix from the
// head: no Publish call carries more than BatchSize messages, and order holds
// across the cut.
func TestClaimIsCutToTheBatchSize(t *testing.T) {
	for _, mode := range []string{"solo", "keyed"} {
		t.Run(mode, func(t *testing.T) {
			db := coordtest.Postgres(t)
			ob := newOutbox(t, db.Pool, outbox.Config{Table: "ob", Channel: ownChannel(db), BatchSize: 2, PollInterval: 20 * time.Millisecond})
			for n := range 4 {
				enqueue(t, db.Pool, ob, ev("cut-a", n), ev("cut-b", n))
			}
			pub := &batchSizes{recorder: newRecorder()}
			r := newRelay(t, ob, db.Pool, pub)
			force(r, mode)
			runRelays(t, r)
			coordtest.Until(t, 20*time.Second, 20*time.Millisecond, "all eight events published", func() bool {
				return pub.published("cut-a") == 3 && pub.published("cut-b") == 3
			})
			pub.check(t)
			sizes := pub.batches()
			for _, n := range sizes {
				if n > 2 {
					t.Fatalf("Publish calls of %v messages, BatchSize is 2", sizes)
				}
			}
			if len(sizes) < 4 {
				t.Fatalf("Publish calls of %v messages: 8 events in batches of at most 2 take at least 4", sizes)
			}
		})
	}
}

// A key whose head failed (and waits for its retry) after the keyed statement's
// window was read but before its bucket was try-locked: the bucket is locked,
// and the claim — a fresh snapshot — sees the head not yet due and claims none
// of the key's rows, and still claims, in the same batch, the rows of other keys
// that follow.
//
// The order is forced inside PostgreSQL as in
// TestKeyParkedDuringTheLockingScanIsNotClaimed: relay 1's try-lock of the raced
// key's bucket waits for the test's gate while relay 2 (BatchSize 1) claims the
// raced key's head and fails it, with an hour's backoff.
func TestKeyFailedDuringTheLockingScanIsNotClaimedBeforeItsRetry(t *testing.T) {
	const raced, other = "retry-raced", "retry-other"
	db := coordtest.Postgres(t)
	backoff := coord.Backoff{Base: time.Hour, Cap: time.Hour, Rand: func(c int64) int64 { return c }}
	ob1 := newOutbox(t, db.Pool, outbox.Config{Table: "ob", Channel: ownChannel(db), PollInterval: 20 * time.Millisecond, Backoff: backoff})
	ob2 := newOutbox(t, db.Pool, outbox.Config{Table: "ob", Channel: ownChannel(db), BatchSize: 1, PollInterval: 20 * time.Millisecond, Backoff: backoff})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	hooked, gate := gatedTryLock(t, ctx, db, raced, other)

	// In seq order: relay 1 locks other:0, then waits at raced:0; after the
	// gate it locks raced:0, raced:1 and other:1 (its key already held).
	enqueue(t, db.Pool, ob1, ev(other, 0))
	enqueue(t, db.Pool, ob1, ev(raced, 0), ev(raced, 1))
	enqueue(t, db.Pool, ob1, ev(other, 1))

	pub1 := &batchSizes{recorder: newRecorder()}
	gate.runKeyed(ob1, hooked, pub1)

	// Relay 2 can lock only the raced key (relay 1 holds the other); it fails
	// the head, which now waits an hour for its retry.
	rec2 := newRecorder()
	rec2.fail = func(outbox.Message) error { return errors.New("broker refuses it") }
	r2 := newRelay(t, ob2, db.Pool, rec2)
	stop2 := runRelays(t, r2)
	coordtest.Until(t, 20*time.Second, 20*time.Millisecond, "relay 2 to fail the raced key's head", func() bool {
		return count(t, db.Pool, `SELECT count(*) FROM ob WHERE aggregateid = $1 AND attempts = 1`, raced) == 1
	})
	stop2()
	if s := r2.Stats(); s.Failures != 1 || s.Published != 0 {
		t.Fatalf("relay 2: %+v, want 1 failure, 0 published", s)
	}

	gate.open()
	coordtest.Until(t, 20*time.Second, 20*time.Millisecond, "relay 1 to publish the other key", func() bool { return pub1.published(other) == 1 })
	if n := pub1.published(raced); n != -1 {
		t.Fatalf("relay 1 published event %d of a key whose head waits an hour for its retry", n)
	}
	pub1.check(t)
	if sizes := pub1.batches(); sizes[0] != 2 {
		t.Fatalf("relay 1's Publish calls %v, want the first with both events of the other key (the not-due key is passed over, not a stop)", sizes)
	}
}

// A publisher that breaks the contract — it publishes a message after an
// earlier message of the same key failed in the same call — does not get that
// message marked: it stays pending behind its head (to be published again, in
// order; the duplicate is the inbox's), and the breach is logged.
func TestMessagePublishedPastItsKeysFailureIsNotMarked(t *testing.T) {
	log := &logged{}
	db, ob := setup(t, outbox.Config{Table: "ob", PollInterval: 20 * time.Millisecond, Logger: slog.New(log),
		Backoff: coord.Backoff{Base: time.Hour, Cap: time.Hour, Rand: func(c int64) int64 { return c }}})
	ids := enqueue(t, db.Pool, ob, ev("k", 0), ev("k", 1), ev("other", 0))
	var mu sync.Mutex
	others := 0 // publications of other:0
	pub := publisherOf(func(msgs []outbox.Message) []error {
		errs := make([]error, len(msgs))
		for i, m := range msgs {
			if _, n := parse(m); m.Key == "k" && n == 0 {
				errs[i] = errors.New("broker refuses the head")
			} else if m.Key == "other" {
				mu.Lock()
				others++
				mu.Unlock()
			} // k:1 "published" anyway
		}
		return errs
	})
	r := newRelay(t, ob, db.Pool, pub)
	stop := runRelays(t, r)
	coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "the batch committed", func() bool {
		s := r.Stats()
		return s.Failures >= 1 && s.Published >= 1
	})
	stop()
	mu.Lock()
	published := others
	mu.Unlock()
	if s := r.Stats(); s.Published != 1 || published != 1 {
		t.Fatalf("%d marked, other:0 published %d times; want only other:0 marked, in the batch of the breach", s.Published, published)
	}
	if n := count(t, db.Pool, `SELECT count(*) FROM ob WHERE id = $1 AND published_at IS NULL AND attempts = 0`, ids[1].String()); n != 1 {
		t.Fatal("k:1, published past its head's failure, was marked (or counted as an attempt)")
	}
	if n := len(log.with("outbox relay: publisher published past a failure of the same key", "key")); n != 1 {
		t.Fatalf("%d contract breaches logged, want 1", n)
	}
}

// publisherOf adapts a function of the whole batch to Publisher.
type publisherOf func(msgs []outbox.Message) []error

func (f publisherOf) Publish(_ context.Context, msgs []outbox.Message) []error { return f(msgs) }

// A head's first failure schedules its retry after the backoff's first delay
// (retry 0: the Base ceiling), not a later, longer one.
func TestFirstFailureWaitsTheFirstBackoffDelay(t *testing.T) {
	db, ob := setup(t, outbox.Config{Table: "ob", PollInterval: 20 * time.Millisecond,
		Backoff: coord.Backoff{Base: time.Hour, Cap: 100 * time.Hour, Rand: func(c int64) int64 { return c }}})
	ids := enqueue(t, db.Pool, ob, ev("k", 0))
	r, err := ob.NewRelay(db.Pool, publisherOf(func(msgs []outbox.Message) []error {
		errs := make([]error, len(msgs))
		for i := range errs {
			errs[i] = errors.New("broker refuses it")
		}
		return errs
	}))
	if err != nil {
		t.Fatal(err)
	}
	stop := runRelays(t, r)
	coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "the head's failure recorded", func() bool {
		return count(t, db.Pool, `SELECT count(*) FROM ob WHERE attempts = 1`) == 1
	})
	stop()
	var wait float64
	if err := db.Pool.QueryRow(context.Background(), `SELECT extract(epoch FROM next_attempt_at - clock_timestamp())::float8 FROM ob WHERE id = $1`,
		ids[0].String()).Scan(&wait); err != nil {
		t.Fatal(err)
	}
	if wait < 3500 || wait > 3600 {
		t.Fatalf("first retry in %.0f s, want the first backoff ceiling (3600 s)", wait)
	}
}

// The oldest-unpublished gauge reports the age of a pending event (one whose
// publication failed and waits for its retry), not 0.
func TestOldestAgeGaugeSeesAPendingEvent(t *testing.T) {
	tm := newTestMeter()
	db, ob := setup(t, outbox.Config{Table: "ob", MeterProvider: tm, PollInterval: 20 * time.Millisecond,
		Backoff: coord.Backoff{Base: time.Hour, Cap: time.Hour, Rand: func(c int64) int64 { return c }}})
	enqueue(t, db.Pool, ob, ev("k", 0))
	rec := newRecorder()
	rec.fail = func(outbox.Message) error { return errors.New("broker refuses it") }
	r := newRelay(t, ob, db.Pool, rec)
	runRelays(t, r)
	coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "the oldest-age gauge above 0", func() bool {
		return r.Stats().Failures >= 1 && tm.gauge(t, "coordkit.outbox.oldest_unpublished.age") > 0
	})
}

// NewRelay needs both a database and a publisher: either one missing is a
// *ConfigError, before anything runs.
func TestNewRelayNeedsADatabaseAndAPublisher(t *testing.T) {
	ob, err := outbox.New(outbox.Config{Table: "ob"})
	if err != nil {
		t.Fatal(err)
	}
	pool, pub := &pgxpool.Pool{}, newRecorder() // never used: NewRelay connects nothing
	for _, tc := range []struct {
		name string
		db   *pgxpool.Pool
		pub  outbox.Publisher
	}{{"no database", nil, pub}, {"no publisher", pool, nil}, {"neither", nil, nil}} {
		if r, err := ob.NewRelay(tc.db, tc.pub); !errors.Is(err, outbox.ErrInvalidConfig) || r != nil {
			t.Fatalf("%s: NewRelay = %v, %v; want a ConfigError", tc.name, r, err)
		}
	}
	if r, err := ob.NewRelay(pool, pub); err != nil || r == nil {
		t.Fatalf("NewRelay with both = %v, %v", r, err)
	}
}
