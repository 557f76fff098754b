package schedule

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestFiresCommitEffectRecordAndProgressTogether: one scheduler runs an
// interval job; every committed fire is one effect row, one fire record (ok,
// with the partition's token) and the job's last nominal time at the newest
// fire; the effects' keys are the fires' identities.
func TestFiresCommitEffectRecordAndProgressTogether(t *testing.T) {
	e := newEnv(t)
	r := e.start(t, Config{}, Job{Name: "tick", Every: 100 * time.Millisecond, Handler: effect})
	coordtest.Until(t, 15*time.Second, 50*time.Millisecond, "5 fires of tick to commit", func() bool {
		return e.count(t, `SELECT count(*) FROM effects`) >= 5
	})
	r.stop(t)
	effects := e.count(t, `SELECT count(*) FROM effects`)
	records := e.count(t, `SELECT count(*) FROM coord_schedule_fires WHERE outcome = 'ok'`)
	if effects != records {
		t.Errorf("%d effects, %d fire records", effects, records)
	}
	keys := map[string]bool{}
	rows, err := e.pool.Query(context.Background(), `SELECT local_time, fold FROM coord_schedule_fires WHERE job = 'tick'`)
	if err != nil {
		t.Fatal(err)
	}
	id := ID{Tenant: e.tenant, Job: "tick"}
	if _, err := pgx.ForEachRow(rows, []any{&id.Local, &id.Fold}, func() error { keys[id.Key()] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, `SELECT count(*) FROM effects WHERE key = ANY($1)`, mapKeys(keys)); n != effects {
		t.Errorf("%d of %d effects carry a fire record's key", n, effects)
	}
	var last, newest time.Time
	if err := e.pool.QueryRow(context.Background(), `SELECT (SELECT last_nominal FROM coord_schedule WHERE job = 'tick'),
		(SELECT max(nominal) FROM coord_schedule_fires WHERE job = 'tick')`).Scan(&last, &newest); err != nil {
		t.Fatal(err)
	}
	if !last.Equal(newest) {
		t.Errorf("last_nominal %s, newest fire %s", last, newest)
	}
	if n := e.count(t, `SELECT count(*) FROM coord_schedule_fires WHERE token NOT LIKE '%ownership.schedule.%'`); n != 0 {
		t.Errorf("%d fires without a partition's token", n)
	}
}

// TestFailingHandlerIsRetriedThenRecordedFailed: a handler that fails has
// its transaction rolled back (no effect), is called MaxAttempts times, and
// the fire is then recorded as failed; the schedule moves on.
func TestFailingHandlerIsRetriedThenRecordedFailed(t *testing.T) {
	e := newEnv(t)
	var calls atomic.Int32
	fail := func(ctx context.Context, tx pgx.Tx, f *Fire) error {
		calls.Add(1)
		if err := effect(ctx, tx, f); err != nil {
			return err
		}
		return errors.New("card declined")
	}
	e.start(t, Config{Retry: coordBackoffFast()}, Job{Name: "fails", Every: time.Second, MaxAttempts: 2, Handler: fail})
	coordtest.Until(t, 15*time.Second, 50*time.Millisecond, "a fire of 'fails' recorded failed", func() bool {
		return e.count(t, `SELECT count(*) FROM coord_schedule_fires WHERE outcome = 'failed' AND reason LIKE '%card declined%'`) >= 1
	})
	if n := e.count(t, `SELECT count(*) FROM effects`); n != 0 {
		t.Errorf("%d effects committed by a failing handler", n)
	}
	if c := calls.Load(); c < 2 {
		t.Errorf("handler called %d times, want MaxAttempts = 2 before the failure record", c)
	}
}

// TestFailedFireReasonIsStorableText: the reason recorded for a failed fire is
// the handler's error cut to 1024 bytes — on a rune boundary and without NUL
// bytes, or PostgreSQL refuses the record (SQLSTATE 22021) and the fire is
// never recorded. The error here starts with a NUL and goes on in two-byte
// runes past byte 1024.
func TestFailedFireReasonIsStorableText(t *testing.T) {
	e := newEnv(t)
	msg := "\x00" + strings.Repeat("é", 600)
	fail := func(ctx context.Context, tx pgx.Tx, f *Fire) error { return errors.New(msg) }
	e.start(t, Config{Retry: coordBackoffFast()}, Job{Name: "fails", Every: time.Second, MaxAttempts: 1, Handler: fail})
	coordtest.Until(t, 15*time.Second, 50*time.Millisecond, "the failed fire recorded with its cut reason", func() bool {
		return e.count(t, `SELECT count(*) FROM coord_schedule_fires WHERE outcome = 'failed' AND reason LIKE '%éé%' AND octet_length(reason) <= 1024`) >= 1
	})
}
