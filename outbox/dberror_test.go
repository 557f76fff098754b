package outbox_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

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

// A relay whose batches fail on the database (here: its table renamed away)
// keeps running, backs off with a growing streak (0, 1, 2, …, so the backoff
// grows), counts each failure in Stats().DBErrors, and publishes once the table
// is back.
func TestRelayRetriesDatabaseErrorsWithGrowingBackoff(t *testing.T) {
	log := &logged{}
	const failed = "outbox relay: batch failed, retrying"
	db, ob := setup(t, outbox.Config{Table: "ob_dberr", PollInterval: 20 * time.Millisecond, Logger: slog.New(log),
		Backoff: coord.Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond}})
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `ALTER TABLE ob_dberr RENAME TO ob_dberr_away`); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	r, err := ob.NewRelay(db.Pool, rec)
	if err != nil {
		t.Fatal(err)
	}
	runRelays(t, r)
	coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "three failed batches", func() bool { return len(log.with(failed, "streak")) >= 3 })
	if _, err := db.Pool.Exec(ctx, `ALTER TABLE ob_dberr_away RENAME TO ob_dberr`); err != nil {
		t.Fatal(err)
	}
	enqueue(t, db.Pool, ob, ev("k", 1))
	coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "the event published after the table came back", func() bool { return rec.published("k") == 1 })
	got := log.with(failed, "streak")
	for i := range 3 {
		if got[i].Int64() != int64(i) {
			t.Fatalf("streaks of the failed batches %v, want 0, 1, 2, …", got)
		}
	}
	if st := r.Stats(); st.DBErrors < 3 {
		t.Fatalf("Stats().DBErrors = %d after %d logged failures, want ≥ 3", st.DBErrors, len(got))
	}
}
