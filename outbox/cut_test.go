package outbox_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// The relay's connections are cut again and again while it works through a
// backlog in small batches — so cuts land in the round trip that carries a
// batch's marks, its COMMIT and the next batch's claim, as well as anywhere else.
// Whatever a cut lost (a COMMIT that may or may not have landed, a claim that
// rode with it), the relay carries on by itself: every event is published, the
// first delivery of each in order per key, and nothing is left pending.
func TestRelaySurvivesCutsDuringItsRoundTrips(t *testing.T) {
	rep := coordtest.NewResult(t, "the relay's connections cut while it publishes a backlog", coordtest.Faults("connections cut"))
	defer coordtest.Report(t, rep)
	for _, mode := range []string{"solo", "keyed"} {
		t.Run(mode, func(t *testing.T) {
			db := coordtest.Postgres(t)
			ob := newOutbox(t, db.Pool, outbox.Config{Table: "ob", Channel: ownChannel(db), BatchSize: 5, PollInterval: 20 * time.Millisecond,
				Backoff: coord.Backoff{Base: 5 * time.Millisecond, Cap: 50 * time.Millisecond}})
			const keys, perKey = 8, 40
			for n := range perKey {
				var es []outbox.Event
				for k := range keys {
					es = append(es, ev(fmt.Sprintf("k%d", k), n))
				}
				enqueue(t, db.Pool, ob, es...)
			}
			pool, proxy := coordtest.ProxiedPool(t, db, 0)
			rec := newRecorder()
			rec.delay = time.Millisecond // each batch a little longer: cuts land inside them
			r, err := ob.NewRelay(pool, rec)
			if err != nil {
				t.Fatal(err)
			}
			if mode == "keyed" {
				outbox.ForceKeyed(r)
			} else {
				outbox.ForceSolo(r)
			}
			runRelays(t, r)
			published := func() bool {
				for k := range keys {
					if rec.published(fmt.Sprintf("k%d", k)) != perKey-1 {
						return false
					}
				}
				return true
			}
			cuts := 0
			for i := 0; cuts < 12 && !published(); i++ {
				time.Sleep(time.Duration(5+i%4*5) * time.Millisecond)
				proxy.Cut()
				cuts = proxy.Stats().Cut
			}
			coordtest.Until(t, 60*time.Second, 20*time.Millisecond, "every event published after the cuts", published)
			rec.check(t)
			coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "every event marked", func() bool {
				return count(t, db.Pool, `SELECT count(*) FROM ob WHERE published_at IS NULL`) == 0
			})
			st := proxy.Stats()
			t.Logf("%s: %d connections cut, %d batches, %d published, %d batches failed with a database error", mode, st.Cut, r.Stats().Batches, r.Stats().Published, r.Stats().DBErrors)
			if st.Cut == 0 || r.Stats().DBErrors == 0 {
				t.Fatalf("cut %d connections, %d batch errors: the cuts did not reach the relay's batches", st.Cut, r.Stats().DBErrors)
			}
			rep.Trials++
			rep.Faults["connections cut"] += st.Cut
		})
	}
	rep.Outcome["every event published in order, none left pending"] = int64(rep.Trials)
}
