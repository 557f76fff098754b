package outbox_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/outbox"
)

// streaks records the "streak" of every "batch failed" warning a relay logs.
type streaks struct {
	mu sync.Mutex
	n  []int64
}

func (s *streaks) Enabled(context.Context, slog.Level) bool { return true }
func (s *streaks) WithAttrs([]slog.Attr) slog.Handler       { return s }
func (s *streaks) WithGroup(string) slog.Handler            { return s }
func (s *streaks) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "outbox relay: batch failed, retrying" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "streak" {
			s.mu.Lock()
			s.n = append(s.n, a.Value.Int64())
			s.mu.Unlock()
		}
		return true
	})
	return nil
}

func (s *streaks) get() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.n...)
}

// A relay whose batches fail on the database (here: its table renamed away)
// keeps running, backs off with a growing streak (0, 1, 2, …, so the backoff
// grows), counts each failure in Stats().DBErrors, and publishes once the table
// is back.
func TestRelayRetriesDatabaseErrorsWithGrowingBackoff(t *testing.T) {
	log := &streaks{}
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
	waitFor(t, "three failed batches", 30*time.Second, func() bool { return len(log.get()) >= 3 })
	if _, err := db.Pool.Exec(ctx, `ALTER TABLE ob_dberr_away RENAME TO ob_dberr`); err != nil {
		t.Fatal(err)
	}
	enqueue(t, db.Pool, ob, ev("k", 1))
	waitFor(t, "the event published after the table came back", 30*time.Second, func() bool { return rec.published("k") == 1 })
	got := log.get()
	for i := range 3 {
		if got[i] != int64(i) {
			t.Fatalf("streaks of the failed batches %v, want 0, 1, 2, …", got)
		}
	}
	if st := r.Stats(); st.DBErrors < 3 {
		t.Fatalf("Stats().DBErrors = %d after %d logged failures, want ≥ 3", st.DBErrors, len(got))
	}
}
