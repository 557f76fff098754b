package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/propagation"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// countingPublisher publishes through PublisherFunc, fails every attempt of the
// keys in fail with their error, and counts attempts per event and per key.
type countingPublisher struct {
	mu       sync.Mutex
	fail     map[string]error
	attempts map[outbox.ID]int
	perKey   map[string]int
	ok       map[outbox.ID]int
}

// poisonBatch enqueues n events of the key "poison" interleaved with events of
// three good keys, behind a publisher that fails every "poison" message with
// err, and returns that publisher and the good events' ids.
func poisonBatch(t *testing.T, db *coordtest.PostgresDB, ob *outbox.Outbox, n int, err error) (*countingPublisher, []outbox.ID) {
	t.Helper()
	pub := newCountingPublisher(map[string]error{"poison": err})
	var es []outbox.Event
	for i := range n {
		es = append(es, ev("poison", i), ev(fmt.Sprintf("good%d", i%3), i/3))
	}
	ids := enqueue(t, db.Pool, ob, es...)
	var good []outbox.ID
	for i, e := range es {
		if e.Key != "poison" {
			good = append(good, ids[i])
		}
	}
	return pub, good
}

func newCountingPublisher(fail map[string]error) *countingPublisher {
	return &countingPublisher{fail: fail, attempts: map[outbox.ID]int{}, perKey: map[string]int{}, ok: map[outbox.ID]int{}}
}

func (p *countingPublisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	return outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.attempts[m.ID]++
		p.perKey[m.Key]++
		if err := p.fail[m.Key]; err != nil {
			return err
		}
		p.ok[m.ID]++
		return nil
	}).Publish(ctx, msgs)
}

func (p *countingPublisher) published(ids []outbox.ID) (once, more int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		switch p.ok[id] {
		case 1:
			once++
		case 0:
		default:
			more++
		}
	}
	return once, more
}

func (p *countingPublisher) keyAttempts(k string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.perKey[k]
}

// waitGood waits until every event of good, poisonBatch's events of the good
// keys, was published.
func (p *countingPublisher) waitGood(t *testing.T, good []outbox.ID) {
	t.Helper()
	coordtest.Until(t, 20*time.Second, 20*time.Millisecond, "every other event published", func() bool {
		once, _ := p.published(good)
		return once == len(good)
	})
}

// goodOnce fails the test unless every event of good was published exactly once.
func (p *countingPublisher) goodOnce(t *testing.T, good []outbox.ID) {
	t.Helper()
	if once, more := p.published(good); once != len(good) || more != 0 {
		t.Fatalf("other keys: %d published once, %d more than once, of %d", once, more, len(good))
	}
}

// waitPoisonParked waits until ob's dead-letter table holds one event, the
// poison key's head, and returns it; the poison key attempted more than
// maxAttempts times meanwhile fails the test: that would mean what tooMany says.
func (p *countingPublisher) waitPoisonParked(t *testing.T, ob *outbox.Outbox, db *pgxpool.Pool, maxAttempts int, tooMany string) []outbox.ParkedEvent {
	t.Helper()
	var parked []outbox.ParkedEvent
	coordtest.Until(t, 20*time.Second, 20*time.Millisecond, "the poison head parked", func() bool {
		if got := p.keyAttempts("poison"); got > maxAttempts {
			t.Fatalf("poison key attempted %d times, MaxAttempts is %d: %s", got, maxAttempts, tooMany)
		}
		parked, _ = ob.Parked(context.Background(), db, 10)
		return len(parked) == 1
	})
	return parked
}

// A publisher error the relay must still be able to record: NUL bytes, invalid
// UTF-8, a megabyte of (multi-byte) text, a rune straddling the relay's cut. On
// the old code PostgreSQL rejected the last_error write (SQLSTATE 22021), the
// whole batch rolled back and was published again, forever. Here: the poison
// key's head is attempted exactly MaxAttempts times and parks with a storable
// last_error, every other event of the same batches is published exactly once,
// and the relay keeps publishing what comes after.
func TestPoisonErrorTextParksAndOthersFlowOnce(t *testing.T) {
	cases := map[string]string{
		"nul":             "broker said: \x00 bad",
		"invalid utf8":    "broker said: \xff\xfe\xc3(",
		"1 MiB of text":   strings.Repeat("ошибка ", 1<<20/13),
		"straddling rune": strings.Repeat("a", 1999) + "€ and more",
	}
	for name, text := range cases {
		t.Run(name, func(t *testing.T) {
			const maxAttempts = 2
			db, ob := setup(t, outbox.Config{Table: "ob", MaxAttempts: maxAttempts, PollInterval: 20 * time.Millisecond,
				Backoff: coord.Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond}})
			pub, good := poisonBatch(t, db, ob, 10, errors.New(text))
			r := newRelay(t, ob, db.Pool, pub)
			runRelays(t, r)
			parked := pub.waitPoisonParked(t, ob, db.Pool, maxAttempts, "its batch rolled back and was republished")
			if p := string(parked[0].Payload); p != "poison:0" {
				t.Fatalf("parked %s (payload %q), want the poison head, poison:0", parked[0].ID, p)
			}
			if got := pub.keyAttempts("poison"); got != maxAttempts {
				t.Fatalf("poison key attempted %d times, want exactly MaxAttempts = %d (a batch rolled back and was republished)", got, maxAttempts)
			}
			le := parked[0].LastError
			if !utf8.ValidString(le) || strings.ContainsRune(le, 0) || le == "" || len(le) > 2000 {
				t.Fatalf("parked last_error not clean: %d bytes, valid %v", len(le), utf8.ValidString(le))
			}
			// The relay keeps going: a later event of another key is published.
			late := enqueue(t, db.Pool, ob, ev("late", 0))
			good = append(good, late...)
			pub.waitGood(t, good)
			pub.goodOnce(t, good)
			// (the batch that published the last of them may still be committing)
			coordtest.Until(t, 20*time.Second, 20*time.Millisecond, "the other keys' events marked", func() bool {
				return count(t, db.Pool, `SELECT count(*) FROM ob WHERE published_at IS NULL AND aggregateid <> 'poison'`) == 0
			})
			if got := r.Stats().Parked; got != 1 {
				t.Fatalf("relay parked %d, want 1", got)
			}
		})
	}
}

// A failure to record a failure (here a CHECK constraint on the outbox rejects
// the error text) must not roll back the other keys' marks nor loop: the others
// are published exactly once, and the failing key's attempts are still counted —
// it parks after MaxAttempts, with exactly MaxAttempts publish attempts.
func TestFailureToRecordAFailureStillCountsAndMarks(t *testing.T) {
	const maxAttempts = 3
	db, ob := setup(t, outbox.Config{Table: "ob", MaxAttempts: maxAttempts, PollInterval: 20 * time.Millisecond,
		Backoff: coord.Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond}})
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `ALTER TABLE ob ADD CONSTRAINT short_errors CHECK (last_error NOT LIKE '%unrecordable%')`); err != nil {
		t.Fatal(err)
	}
	pub, good := poisonBatch(t, db, ob, 10, errors.New("unrecordable broker error"))
	r := newRelay(t, ob, db.Pool, pub)
	runRelays(t, r)
	parked := pub.waitPoisonParked(t, ob, db.Pool, maxAttempts, "the failure was not counted")
	if got := pub.keyAttempts("poison"); got != maxAttempts {
		t.Fatalf("poison key attempted %d times, want MaxAttempts = %d", got, maxAttempts)
	}
	pub.waitGood(t, good)
	pub.goodOnce(t, good)
	t.Logf("parked after %d attempts, last_error %q", parked[0].Attempts, parked[0].LastError)
}

// When parking itself fails (the dead-letter table rejects the row), the other
// keys are still published exactly once and the failing head's attempts are
// still recorded, one per publish attempt — it backs off instead of looping.
func TestFailureToParkStillCountsAndMarks(t *testing.T) {
	const maxAttempts = 2
	db, ob := setup(t, outbox.Config{Table: "ob", MaxAttempts: maxAttempts, PollInterval: 20 * time.Millisecond,
		Backoff: coord.Backoff{Base: 50 * time.Millisecond, Cap: 100 * time.Millisecond}})
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `ALTER TABLE ob_parked ADD CONSTRAINT no_parking CHECK (aggregateid <> 'poison')`); err != nil {
		t.Fatal(err)
	}
	pub, good := poisonBatch(t, db, ob, 10, errors.New("broker rejects this key"))
	r := newRelay(t, ob, db.Pool, pub)
	runRelays(t, r)
	pub.waitGood(t, good)
	coordtest.Until(t, 20*time.Second, 20*time.Millisecond, "park attempted and refused twice", func() bool { return pub.keyAttempts("poison") >= maxAttempts+2 })
	pub.goodOnce(t, good)
	// Every attempt is counted in the row, so the head backs off instead of being
	// republished at once (allow one attempt in flight). The relay keeps going:
	// compare a row read between two equal readings of the publisher's count.
	var attempts, got int
	coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "a quiet moment between two attempts", func() bool {
		before := pub.keyAttempts("poison")
		if err := db.Pool.QueryRow(ctx, `SELECT attempts FROM ob WHERE aggregateid = 'poison' ORDER BY seq LIMIT 1`).Scan(&attempts); err != nil {
			t.Fatal(err)
		}
		got = pub.keyAttempts("poison")
		return got == before
	})
	if attempts < got-1 || attempts > got {
		t.Fatalf("row counts %d attempts, publisher saw %d", attempts, got)
	}
	if p, _ := ob.Parked(ctx, db.Pool, 10); len(p) != 0 {
		t.Fatalf("parked %d despite the refusing dead-letter table", len(p))
	}
}

// Headers the outbox derives itself (the propagator's trace context) are made
// storable: a propagator injecting NUL or invalid UTF-8 does not fail EnqueueTx
// with a database error.
func TestDerivedHeadersAreMadeStorable(t *testing.T) {
	db, ob := setup(t, outbox.Config{Table: "ob", Propagator: hostilePropagator{}})
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		_, err := ob.EnqueueTx(ctx, tx, ev("k", 0))
		return err
	})
	if err != nil {
		t.Fatalf("enqueue with a hostile propagator: %v", err)
	}
	var h string
	if err := db.Pool.QueryRow(ctx, `SELECT headers->>'x-hostile' FROM ob`).Scan(&h); err != nil {
		t.Fatal(err)
	}
	if !utf8.ValidString(h) || strings.ContainsRune(h, 0) || !strings.HasPrefix(h, "a") {
		t.Fatalf("stored header %q", h)
	}
}

type hostilePropagator struct{}

func (hostilePropagator) Inject(_ context.Context, c propagation.TextMapCarrier) {
	c.Set("x-hostile", "a\x00b\xffc")
}
func (hostilePropagator) Extract(ctx context.Context, _ propagation.TextMapCarrier) context.Context {
	return ctx
}
func (hostilePropagator) Fields() []string { return []string{"x-hostile"} }
