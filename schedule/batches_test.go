package schedule

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// billing charges 10 customers, 2 per batch (one fenced transaction each),
// resuming at the cursor.
func billing(pause time.Duration) Handler {
	return func(ctx context.Context, tx pgx.Tx, f *Fire) error {
		next := 0
		if f.Cursor != nil {
			next = int(binary.BigEndian.Uint32(f.Cursor))
		}
		time.Sleep(pause)
		for c := next; c < next+2; c++ {
			if _, err := tx.Exec(ctx, `INSERT INTO charges (fire, customer, token) VALUES ($1, $2, $3)`, f.Key(), c, f.Token.String()); err != nil {
				return err
			}
		}
		if next+2 < 10 {
			f.Continue(binary.BigEndian.AppendUint32(nil, uint32(next+2)))
		}
		return nil
	}
}

// TestMultiBatchRunResumedByTheNextOwner: a run of 5 batches (the monthly
// billing run) is cut by its scheduler leaving after 2 batches; the
// scheduler that takes the partition over resumes it at the committed
// cursor and runs the remaining batches: every customer charged once, the
// fire recorded ok after 5 batches, the later batches under the new owner's
// token. Fires that come due while the run is unfinished are missed
// (overlap, OverlapSkip).
func TestMultiBatchRunResumedByTheNextOwner(t *testing.T) {
	e := newEnv(t)
	if _, err := e.pool.Exec(testCtx(t), `CREATE TABLE charges (fire text NOT NULL, customer int NOT NULL, token text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	job := Job{Name: "billing", Every: time.Second, Handler: billing(300 * time.Millisecond)}
	a := e.start(t, Config{}, job)
	var key string
	coordtest.Until(t, 20*time.Second, 20*time.Millisecond, "the run's second batch committed", func() bool {
		var b int32
		var local time.Time
		err := e.pool.QueryRow(context.Background(), `SELECT batches, local_time FROM coord_schedule_fires WHERE job = 'billing' AND outcome = 'running'`).Scan(&b, &local)
		key = ID{Tenant: e.tenant, Job: "billing", Local: local}.Key()
		return err == nil && b >= 2
	})
	e.start(t, Config{}, job)
	a.stop(t) // Leave: the run's partition moves to the second scheduler
	coordtest.Until(t, 30*time.Second, 50*time.Millisecond, "the run finished", func() bool {
		return e.count(t, `SELECT count(*) FROM coord_schedule_fires WHERE job = 'billing' AND outcome = 'ok' AND batches = 5`) >= 1
	})
	if n := e.count(t, `SELECT count(*) FROM charges WHERE fire = $1`, key); n != 10 {
		t.Errorf("the run charged %d times, want 10", n)
	}
	if n := e.count(t, `SELECT count(DISTINCT customer) FROM charges WHERE fire = $1`, key); n != 10 {
		t.Errorf("the run charged %d distinct customers, want 10", n)
	}
	if n := e.count(t, `SELECT count(DISTINCT token) FROM charges WHERE fire = $1`, key); n != 2 {
		t.Errorf("the run's batches ran under %d tokens, want 2 (the first owner's, then the next's)", n)
	}
	if n := e.count(t, `SELECT count(*) FROM (SELECT fire, customer FROM charges GROUP BY 1, 2 HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("%d customers charged twice in one run", n)
	}
	coordtest.Until(t, 10*time.Second, 50*time.Millisecond, "a fire missed for overlap", func() bool {
		return e.outcomes(t, "billing")["missed/overlap"] >= 1
	})
}
