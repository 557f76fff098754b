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

// lastValue reads how many times a sequence was advanced (0 before its first nextval).
func lastValue(t *testing.T, db *coordtest.PostgresDB, seq string) int {
	t.Helper()
	return count(t, db.Pool, `SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM `+seq)
}

// A relay facing held keys — the only pending row belongs to a key it cannot
// lock (held by "another relay": the try-lock answers false), no NOTIFY — makes
// an empty claim and then retries shortly, since the holder will let go, but
// backs off: the delays double up to the poll interval, so it does not spin; it
// never calls the publisher with nothing to publish.
func TestRelayFacingHeldKeysBacksOff(t *testing.T) {
	db := coordtest.Postgres(t)
	ob := newOutbox(t, db.Pool, outbox.Config{Table: "ob", Channel: ownChannel(db), DisableNotify: true, PollInterval: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	scans := fmt.Sprintf("idle_scans_%d", rand.Uint32())
	if _, err := db.Pool.Exec(ctx, `CREATE SEQUENCE `+scans); err != nil {
		t.Fatal(err)
	}
	hooked := hookedTryLock(t, ctx, db, fmt.Sprintf(`
			PERFORM nextval('%s');
			IF key = pg_catalog.hashtext('held') THEN
				RETURN false;
			END IF;`, scans))
	enqueue(t, db.Pool, ob, ev("held", 0))
	rec := newRecorder()
	r, err := ob.NewRelay(hooked, rec)
	if err != nil {
		t.Fatal(err)
	}
	outbox.ForceKeyed(r) // key locks: a solo relay takes none
	runRelays(t, r)
	waitFor(t, "the relay's first locking scan", 10*time.Second, func() bool { return lastValue(t, db, scans) >= 1 })
	time.Sleep(time.Second)
	// Short retries after 2, 4, 8, … ms: about ten in the first second (and the
	// pass the listener's start wakes), then one per doubling.
	first := lastValue(t, db, scans)
	if first < 3 || first > 14 {
		t.Fatalf("%d locking scans in the first second facing a held key: want a few short retries (3 to 14), backing off", first)
	}
	time.Sleep(time.Second)
	if n := lastValue(t, db, scans) - first; n > 2 {
		t.Fatalf("%d more locking scans in the next second: the relay facing a held key spins", n)
	}
	rec.mu.Lock()
	calls := rec.calls
	rec.mu.Unlock()
	if s := r.Stats(); calls != 0 || s.Batches != 0 {
		t.Fatalf("publisher called %d times, %d batches, for empty claims", calls, s.Batches)
	}
}

// An idle relay alone (nothing pending, no NOTIFY) makes an empty claim and then
// waits for its poll interval: nobody holds anything it waits for, so it does not
// retry shortly. Its claims are counted at the relay lease, which a solo claim
// try-locks once.
func TestIdleRelayWaitsForItsPollInterval(t *testing.T) {
	db := coordtest.Postgres(t)
	ob := newOutbox(t, db.Pool, outbox.Config{Table: "ob", Channel: ownChannel(db), DisableNotify: true, PollInterval: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	claims := fmt.Sprintf("idle_claims_%d", rand.Uint32())
	if _, err := db.Pool.Exec(ctx, `CREATE SEQUENCE `+claims); err != nil {
		t.Fatal(err)
	}
	hooked := hookedTryLock(t, ctx, db, fmt.Sprintf(`
			PERFORM nextval('%s');`, claims))
	rec := newRecorder()
	r, err := ob.NewRelay(hooked, rec)
	if err != nil {
		t.Fatal(err)
	}
	runRelays(t, r)
	waitFor(t, "the relay's first claim", 10*time.Second, func() bool { return lastValue(t, db, claims) >= 1 })
	time.Sleep(500 * time.Millisecond)
	// The first pass and, at most, the pass the listener's start wakes.
	if n := lastValue(t, db, claims); n > 3 {
		t.Fatalf("%d claims in 0.5 s with a one-minute poll interval: the idle relay spins", n)
	}
	rec.mu.Lock()
	calls := rec.calls
	rec.mu.Unlock()
	if s := r.Stats(); calls != 0 || s.Batches != 0 {
		t.Fatalf("publisher called %d times, %d batches, for empty claims", calls, s.Batches)
	}
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
			r, err := ob.NewRelay(db.Pool, rec)
			if err != nil {
				t.Fatal(err)
			}
			runRelays(t, r)
			enqueue(t, db.Pool, ob, ev("k", 0), ev("k", 1))
			waitFor(t, "the events published", 10*time.Second, func() bool { return rec.published("k") == 1 })
			if refused {
				waitFor(t, "a prune warning", 10*time.Second, func() bool { return len(log.with(warning, "err")) >= 1 })
				if e := log.with(warning, "err")[0].String(); !strings.Contains(e, "prune refused by the test") {
					t.Fatalf("prune warning's err %q, want the trigger's refusal", e)
				}
				return
			}
			waitFor(t, "the published rows pruned", 10*time.Second, func() bool { return count(t, db.Pool, `SELECT count(*) FROM ob`) == 0 })
			time.Sleep(100 * time.Millisecond) // a few more (empty) prunes
			if ws := log.with(warning, "err"); len(ws) != 0 {
				t.Fatalf("%d prune warnings for prunes that succeeded (first err %v)", len(ws), ws[0])
			}
		})
	}
}

// The claim reads, per locked key, a prefix from the key's true head: rows the
// locking scan skipped while "another relay" held the key come back, so the
// claim can read more than BatchSize rows. The relay cuts the tail: no Publish
// call carries more than BatchSize messages, and the cut keeps per-key order.
// The skipped row is forced as in TestKeySkippedAtItsHeadIsClaimedFromItsHead.
func TestClaimIsCutToTheBatchSize(t *testing.T) {
	const raced, other = "cut-raced", "cut-other"
	db := coordtest.Postgres(t)
	ob := newOutbox(t, db.Pool, outbox.Config{Table: "ob", Channel: ownChannel(db), BatchSize: 2, PollInterval: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hooked, calls := firstTryLockFails(t, ctx, db, raced)
	// The scan skips raced:0, locks other:0 and raced:1 (BatchSize rows); the
	// claim reads raced:0, other:0, raced:1.
	enqueue(t, db.Pool, ob, ev(raced, 0))
	enqueue(t, db.Pool, ob, ev(other, 0))
	enqueue(t, db.Pool, ob, ev(raced, 1))
	pub := &batchSizes{recorder: newRecorder()}
	r, err := ob.NewRelay(hooked, pub)
	if err != nil {
		t.Fatal(err)
	}
	outbox.ForceKeyed(r) // the race is in the keyed claim
	runRelays(t, r)
	waitFor(t, "all three events published", 20*time.Second, func() bool {
		return pub.published(raced) == 1 && pub.published(other) == 0
	})
	pub.check(t)
	if n := lastValue(t, db, calls); n < 2 {
		t.Fatalf("the raced key was try-locked %d times: the race did not happen", n)
	}
	sizes := pub.batches()
	for _, n := range sizes {
		if n > 2 {
			t.Fatalf("Publish calls of %v messages, BatchSize is 2", sizes)
		}
	}
	if sizes[0] != 2 {
		t.Fatalf("Publish calls of %v messages, want the first to be the claim cut to 2", sizes)
	}
}

// A key whose head failed (and waits for its retry) after the locking scan's
// snapshot but before the scan try-locked it: the scan locks it, the claim — a
// fresh snapshot — sees the head not yet due and claims none of the key's rows,
// and still claims, in the same batch, the rows of other keys that follow.
//
// The order is forced inside PostgreSQL as in
// TestKeyParkedDuringTheLockingScanIsNotClaimed: relay 1's try-lock of the raced
// key waits for the test's gate while relay 2 (BatchSize 1) claims the raced
// key's head and fails it, with an hour's backoff.
func TestKeyFailedDuringTheLockingScanIsNotClaimedBeforeItsRetry(t *testing.T) {
	const raced, other = "retry-raced", "retry-other"
	db := coordtest.Postgres(t)
	backoff := coord.Backoff{Base: time.Hour, Cap: time.Hour, Rand: func(c int64) int64 { return c }}
	ob1 := newOutbox(t, db.Pool, outbox.Config{Table: "ob", Channel: ownChannel(db), PollInterval: 20 * time.Millisecond, Backoff: backoff})
	ob2 := newOutbox(t, db.Pool, outbox.Config{Table: "ob", Channel: ownChannel(db), BatchSize: 1, PollInterval: 20 * time.Millisecond, Backoff: backoff})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	hooked, gate := gatedTryLock(t, ctx, db, raced)

	// In seq order: relay 1 locks other:0, then waits at raced:0; after the
	// gate it locks raced:0, raced:1 and other:1 (its key already held).
	enqueue(t, db.Pool, ob1, ev(other, 0))
	enqueue(t, db.Pool, ob1, ev(raced, 0), ev(raced, 1))
	enqueue(t, db.Pool, ob1, ev(other, 1))

	pub1 := &batchSizes{recorder: newRecorder()}
	r1, err := ob1.NewRelay(hooked, pub1)
	if err != nil {
		t.Fatal(err)
	}
	outbox.ForceKeyed(r1) // the race is in the keyed claim
	runRelays(t, r1)
	gate.waitForAWaiter("relay 1's locking scan to wait at the raced key")

	// Relay 2 can lock only the raced key (relay 1 holds the other); it fails
	// the head, which now waits an hour for its retry.
	rec2 := newRecorder()
	rec2.fail = func(outbox.Message) error { return errors.New("broker refuses it") }
	r2, err := ob2.NewRelay(db.Pool, rec2)
	if err != nil {
		t.Fatal(err)
	}
	stop2 := runRelays(t, r2)
	waitFor(t, "relay 2 to fail the raced key's head", 20*time.Second, func() bool {
		return count(t, db.Pool, `SELECT count(*) FROM ob WHERE aggregateid = $1 AND attempts = 1`, raced) == 1
	})
	stop2()
	if s := r2.Stats(); s.Failures != 1 || s.Published != 0 {
		t.Fatalf("relay 2: %+v, want 1 failure, 0 published", s)
	}

	gate.open()
	waitFor(t, "relay 1 to publish the other key", 20*time.Second, func() bool { return pub1.published(other) == 1 })
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
	r, err := ob.NewRelay(db.Pool, pub)
	if err != nil {
		t.Fatal(err)
	}
	stop := runRelays(t, r)
	waitFor(t, "the batch committed", 10*time.Second, func() bool {
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
	waitFor(t, "the head's failure recorded", 10*time.Second, func() bool {
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
	r, err := ob.NewRelay(db.Pool, rec)
	if err != nil {
		t.Fatal(err)
	}
	runRelays(t, r)
	waitFor(t, "the oldest-age gauge above 0", 10*time.Second, func() bool {
		return r.Stats().Failures >= 1 && tm.gauge(t, "coordkit.outbox.oldest_unpublished.age") > 0
	})
}

// When PostgreSQL refuses to count a failure at all (not even with the fixed
// fallback text: here a CHECK refuses any attempt of the poison key), the
// batch's marks still commit alone: the other keys are published and marked
// exactly once, and the refusal is logged.
func TestFailureCountRefusedStillCommitsTheMarks(t *testing.T) {
	log := &logged{}
	db, ob := setup(t, outbox.Config{Table: "ob", PollInterval: 20 * time.Millisecond, Logger: slog.New(log),
		Backoff: coord.Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond}})
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `ALTER TABLE ob ADD CONSTRAINT no_poison_attempts CHECK (aggregateid <> 'poison' OR attempts = 0)`); err != nil {
		t.Fatal(err)
	}
	pub := newCountingPublisher(map[string]error{"poison": errors.New("broker rejects this key")})
	var es []outbox.Event
	for n := range 6 {
		es = append(es, ev("poison", n), ev(fmt.Sprintf("good%d", n%3), n/3))
	}
	ids := enqueue(t, db.Pool, ob, es...)
	var good []outbox.ID
	for i, e := range es {
		if e.Key != "poison" {
			good = append(good, ids[i])
		}
	}
	r, err := ob.NewRelay(db.Pool, pub)
	if err != nil {
		t.Fatal(err)
	}
	stop := runRelays(t, r)
	waitFor(t, "the other keys' events marked", 10*time.Second, func() bool {
		return count(t, db.Pool, `SELECT count(*) FROM ob WHERE published_at IS NULL AND aggregateid <> 'poison'`) == 0
	})
	// The poison head, never counted, is published again at once: stop it.
	stop()
	if once, more := pub.published(good); once != len(good) || more != 0 {
		t.Fatalf("other keys: %d published once, %d more than once, of %d", once, more, len(good))
	}
	if n := len(log.with("outbox relay: could not count publish failures; committing the marks alone", "err")); n < 1 {
		t.Fatal("the refused failure count was not logged")
	}
}

// A refusal at COMMIT (a deferred constraint: the transaction is over, not
// aborted) is the batch's database error, reported with its cause: there is no
// savepoint left to fall back to, and none is tried. Either at the first COMMIT
// (refused=record: the failure's record) or at the fallback's (refused=fallback:
// the error text was refused first, then the count at COMMIT).
func TestFailureRecordRefusedAtCommitIsReportedWithItsCause(t *testing.T) {
	for _, refused := range []string{"record", "fallback"} {
		t.Run("refused="+refused, func(t *testing.T) {
			log := &logged{}
			db, ob := setup(t, outbox.Config{Table: "ob", PollInterval: 20 * time.Millisecond, Logger: slog.New(log),
				Backoff: coord.Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond}})
			ctx := context.Background()
			if _, err := db.Pool.Exec(ctx, `CREATE FUNCTION refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN RAISE EXCEPTION 'refused at commit by the test'; END $$;
				CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER UPDATE ON ob DEFERRABLE INITIALLY DEFERRED
				FOR EACH ROW WHEN (NEW.attempts > 0) EXECUTE FUNCTION refuse_at_commit()`); err != nil {
				t.Fatal(err)
			}
			if refused == "fallback" {
				if _, err := db.Pool.Exec(ctx, `ALTER TABLE ob ADD CONSTRAINT no_unrecordable CHECK (last_error NOT LIKE '%unrecordable%')`); err != nil {
					t.Fatal(err)
				}
			}
			pub := newCountingPublisher(map[string]error{"poison": errors.New("unrecordable broker error")})
			enqueue(t, db.Pool, ob, ev("poison", 0), ev("good", 0))
			r, err := ob.NewRelay(db.Pool, pub)
			if err != nil {
				t.Fatal(err)
			}
			stop := runRelays(t, r)
			const failed = "outbox relay: batch failed, retrying"
			waitFor(t, "a failed batch", 10*time.Second, func() bool { return len(log.with(failed, "err")) >= 1 })
			stop()
			if e := log.with(failed, "err")[0].String(); !strings.Contains(e, "refused at commit by the test") {
				t.Fatalf("the failed batch's err %q, want the refusal at COMMIT", e)
			}
			if n := len(log.with("outbox relay: could not count publish failures; committing the marks alone", "err")); n != 0 {
				t.Fatal("fell back to committing the marks alone after the transaction was over")
			}
			if refused == "record" {
				if n := len(log.with("outbox relay: could not record publish failures; counting the attempts without their error text", "err")); n != 0 {
					t.Fatal("fell back to the fixed error text after the transaction was over")
				}
			}
		})
	}
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
