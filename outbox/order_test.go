package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// Four relays, many interleaved keys, concurrent producers and a flaky,
// slow-ish publisher: per key, no event is ever published before its predecessor
// was, no key is published by two relays at once, and everything is published.
// The relays choose how they claim (mode "auto": solo while the relay lease is
// free, keyed beside others), or one claims solo and three keyed throughout
// ("solo+keyed": the lease must keep the solo batches, which take no key locks,
// apart from the keyed ones).
func TestPerKeyOrderWithSeveralRelays(t *testing.T) {
	for _, c := range []struct {
		mode string
		del  bool
	}{{"auto", false}, {"auto", true}, {"solo+keyed", false}, {"solo+keyed", true}} {
		del := c.del
		t.Run(fmt.Sprintf("%s/delete=%v", c.mode, del), func(t *testing.T) {
			db, ob := setup(t, outbox.Config{Table: "ob", BatchSize: 37, PollInterval: 20 * time.Millisecond,
				DeleteOnPublish: del, MaxAttempts: 1000, Backoff: coord.Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond}})
			rec := newRecorder()
			var failures int
			var fmu sync.Mutex
			rec.fail = func(m outbox.Message) error {
				fmu.Lock()
				defer fmu.Unlock()
				if rand.IntN(10) == 0 {
					failures++
					return errors.New("flaky broker")
				}
				return nil
			}
			rec.delay = 2 * time.Millisecond
			var relays []*outbox.Relay
			for i := range 4 {
				r := newRelay(t, ob, db.Pool, rec)
				if c.mode == "solo+keyed" {
					if i == 0 {
						outbox.ForceSolo(r)
					} else {
						outbox.ForceKeyed(r)
					}
				}
				relays = append(relays, r)
			}
			runRelays(t, relays...)
			const keys, perKey, producers = 24, 40, 4
			var wg sync.WaitGroup
			next := make([]int, keys)
			var nmu sync.Mutex
			for p := range producers {
				wg.Go(func() {
					for i := 0; i < keys*perKey/producers; i++ {
						// pick a key and take its next number inside the transaction,
						// which (with the per-key enqueue lock) fixes the order
						err := pgx.BeginFunc(context.Background(), db.Pool, func(tx pgx.Tx) error {
							k := rand.IntN(keys)
							key := fmt.Sprintf("k%02d", k)
							if _, err := tx.Exec(context.Background(), "SELECT pg_advisory_xact_lock(42, $1)", k); err != nil {
								return err
							}
							nmu.Lock()
							n := next[k]
							next[k]++
							nmu.Unlock()
							if rand.IntN(3) == 0 {
								nmu.Lock()
								n2 := next[k]
								next[k]++
								nmu.Unlock()
								_, err := ob.EnqueueBatchTx(context.Background(), tx, []outbox.Event{ev(key, n), ev(key, n2)})
								return err
							}
							_, err := ob.EnqueueTx(context.Background(), tx, ev(key, n))
							return err
						})
						if err != nil {
							t.Errorf("producer %d: %v", p, err)
							return
						}
					}
				})
			}
			coordtest.Wait(t, &wg, 120*time.Second, "the producers")
			coordtest.Until(t, 90*time.Second, 20*time.Millisecond, "all published", func() bool {
				for k := range keys {
					if rec.published(fmt.Sprintf("k%02d", k)) != next[k]-1 {
						return false
					}
				}
				return true
			})
			rec.check(t)
			sum := 0
			for _, n := range next {
				sum += n
			}
			total, busy, batches, solo := 0, 0, 0, 0
			// the last batch may still be committing its marks
			coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "all marked", func() bool {
				total, busy, batches, solo = 0, 0, 0, 0
				for _, r := range relays {
					s := r.Stats()
					total += int(s.Published)
					batches += int(s.Batches)
					solo += int(s.Solo)
					if s.Published > 0 {
						busy++
					}
				}
				return total >= sum
			})
			t.Logf("events=%d published=%d failures=%d relays busy=%d batches=%d (solo %d)", sum, total, failures, busy, batches, solo)
			if failures == 0 || busy < 2 {
				t.Fatalf("test did not exercise retries (%d) or parallel relays (%d busy)", failures, busy)
			}
			if c.mode == "solo+keyed" && (solo == 0 || solo == batches) {
				t.Fatalf("%d of %d batches solo: the test did not exercise both claims side by side", solo, batches)
			}
			if total != sum {
				t.Fatalf("marked %d, want %d", total, sum)
			}
		})
	}
}
