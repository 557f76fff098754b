package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// checked is a recorder whose Check answers err.
type checked struct {
	*recorder
	err error
}

func (c checked) Check(context.Context) error { return c.err }

// A publisher's Check decides how Run starts: a missing destination is Run's
// error at once; any other failure is a warning and the relay publishes anyway;
// a passing check says nothing.
func TestRelayStartsByCheckingThePublisher(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		warnings int
	}{
		{"passes", nil, 0},
		{"fails", errors.New("broker slow to answer"), 1},
		{"no destination", fmt.Errorf("stream %q: %w", "orders", outbox.ErrNoDestination), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &logged{}
			db, ob := setup(t, outbox.Config{Table: "ob_check", PollInterval: 20 * time.Millisecond, Logger: slog.New(log)})
			rec := newRecorder()
			r := newRelay(t, ob, db.Pool, checked{rec, tc.err})
			if errors.Is(tc.err, outbox.ErrNoDestination) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := r.Run(ctx); !errors.Is(err, outbox.ErrNoDestination) || ctx.Err() != nil {
					t.Fatalf("Run with a missing destination = %v, want ErrNoDestination at once", err)
				}
				return
			}
			runRelays(t, r)
			enqueue(t, db.Pool, ob, ev("k", 1))
			coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "the event published", func() bool { return rec.published("k") == 1 })
			if n := len(log.with("outbox relay: publisher check failed; starting anyway", "err")); n != tc.warnings {
				t.Fatalf("%d check warnings, want %d", n, tc.warnings)
			}
		})
	}
}
