package outbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func newOutbox(t *testing.T, db *pgxpool.Pool, cfg outbox.Config) *outbox.Outbox {
	t.Helper()
	ob, err := outbox.New(cfg)
	migrate(t, db, ob, err)
	return ob
}

// newInbox is an inbox of cfg, its table migrated in db.
func newInbox(t *testing.T, db *pgxpool.Pool, cfg outbox.InboxConfig) *outbox.Inbox {
	t.Helper()
	in, err := outbox.NewInbox(cfg)
	migrate(t, db, in, err)
	return in
}

// migrate fails the test on err, from the constructor of m, or when m's tables
// do not migrate in db.
func migrate(t *testing.T, db *pgxpool.Pool, m interface {
	Migrate(context.Context, outbox.Beginner) error
}, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
}

func setup(t *testing.T, cfg outbox.Config) (*coordtest.PostgresDB, *outbox.Outbox) {
	t.Helper()
	db := coordtest.Postgres(t)
	return db, newOutbox(t, db.Pool, cfg)
}

// ev is event n of key k; its payload is "k:n".
func ev(k string, n int) outbox.Event {
	return outbox.Event{Topic: "test", Key: k, Type: "test.event", Payload: []byte(k + ":" + strconv.Itoa(n))}
}

// evs is events 0 to n-1 of key k.
func evs(k string, n int) []outbox.Event {
	es := make([]outbox.Event, n)
	for i := range es {
		es[i] = ev(k, i)
	}
	return es
}

func parse(m outbox.Message) (string, int) {
	k, n, _ := strings.Cut(string(m.Payload), ":")
	i, _ := strconv.Atoi(n)
	return k, i
}

func enqueue(t testing.TB, db *pgxpool.Pool, ob *outbox.Outbox, es ...outbox.Event) []outbox.ID {
	t.Helper()
	var ids []outbox.ID
	err := pgx.BeginFunc(context.Background(), db, func(tx pgx.Tx) error {
		var err error
		if len(es) == 1 {
			var id outbox.ID
			id, err = ob.EnqueueTx(context.Background(), tx, es[0])
			ids = []outbox.ID{id}
		} else {
			ids, err = ob.EnqueueBatchTx(context.Background(), tx, es)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func count(t testing.TB, db *pgxpool.Pool, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// recorder is a Publisher that checks, at every publish, the order invariant:
// event n of a key is published only after event n-1 of that key was published
// successfully (in this or an earlier call, by any relay sharing the recorder),
// and no two relays publish one key at the same time.
type recorder struct {
	mu         sync.Mutex
	done       map[string]int // key → highest n published successfully (-1: none)
	attempts   map[outbox.ID]int
	inFlight   map[string]bool
	violations []string
	fail       func(m outbox.Message) error // may be nil
	delay      time.Duration
	calls      int
}

func newRecorder() *recorder {
	return &recorder{done: map[string]int{}, attempts: map[outbox.ID]int{}, inFlight: map[string]bool{}}
}

func (r *recorder) Publish(ctx context.Context, msgs []outbox.Message) []error {
	r.mu.Lock()
	r.calls++
	keys := map[string]bool{}
	for _, m := range msgs {
		keys[m.Key] = true
	}
	for k := range keys {
		if r.inFlight[k] {
			r.violations = append(r.violations, fmt.Sprintf("key %s published by two relays at once", k))
		}
		r.inFlight[k] = true
	}
	r.mu.Unlock()
	if r.delay > 0 {
		time.Sleep(r.delay)
	}
	errs := outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		k, n := parse(m)
		last, ok := r.done[k]
		if !ok {
			last = -1
		}
		if n > last+1 {
			r.violations = append(r.violations, fmt.Sprintf("key %s: event %d published before %d", k, n, last+1))
		}
		if r.fail != nil {
			if err := r.fail(m); err != nil {
				return err
			}
		}
		r.attempts[m.ID]++
		if n > last {
			r.done[k] = n
		}
		return nil
	}).Publish(ctx, msgs)
	r.mu.Lock()
	for k := range keys {
		delete(r.inFlight, k)
	}
	r.mu.Unlock()
	return errs
}

func (r *recorder) published(k string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.done[k]
	if !ok {
		return -1
	}
	return n
}

func (r *recorder) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.violations) > 0 {
		t.Fatalf("%d order violations, first: %v", len(r.violations), r.violations[:min(5, len(r.violations))])
	}
}

// runRelays starts relays and returns a stop function that cancels and waits.
func runRelays(t *testing.T, rs ...*outbox.Relay) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() {
			if err := r.Run(ctx); err != nil {
				t.Errorf("relay: %v", err)
			}
		})
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			wg.Wait()
		}
	}
	t.Cleanup(stop)
	return stop
}

// newRelay is ob's relay over db, publishing through pub.
func newRelay(t *testing.T, ob *outbox.Outbox, db *pgxpool.Pool, pub outbox.Publisher) *outbox.Relay {
	t.Helper()
	r, err := ob.NewRelay(db, pub)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// force fixes how r claims: mode "keyed" (outbox.ForceKeyed) or "solo".
func force(r *outbox.Relay, mode string) {
	if mode == "keyed" {
		outbox.ForceKeyed(r)
	} else {
		outbox.ForceSolo(r)
	}
}

// logged keeps every record a relay logs: its message and attributes.
type logged struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logged) Enabled(context.Context, slog.Level) bool { return true }
func (l *logged) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logged) WithGroup(string) slog.Handler            { return l }
func (l *logged) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.recs = append(l.recs, r.Clone())
	l.mu.Unlock()
	return nil
}

// with returns the value of attribute attr of each record logged as msg.
func (l *logged) with(msg, attr string) []slog.Value {
	l.mu.Lock()
	defer l.mu.Unlock()
	var vs []slog.Value
	for _, r := range l.recs {
		if r.Message != msg {
			continue
		}
		v := slog.Value{}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == attr {
				v = a.Value
			}
			return true
		})
		vs = append(vs, v)
	}
	return vs
}
