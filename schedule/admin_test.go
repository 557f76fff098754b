package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestOperatorVerbs: pause turns the scheduled fires into records missed
// (paused) without effects, resume brings them back; trigger runs a manual
// fire; skip next records the next fire skipped and it does not run; backfill
// runs the missed fires of a range once (a second backfill runs nothing);
// every verb leaves an audit row; List shows next and last fires.
func TestOperatorVerbs(t *testing.T) {
	e := newEnv(t)
	const job = "report"
	r := e.start(t, Config{}, Job{Name: job, Every: 200 * time.Millisecond, Handler: effect})
	a := r.s.Admin
	ctx := testCtx(t)
	e.waitRegistered(t, job)

	if err := a.Pause(ctx, job, "alice", "incident 42"); err != nil {
		t.Fatal(err)
	}
	coordtest.Until(t, 10*time.Second, 50*time.Millisecond, "2 fires missed while paused", func() bool {
		return e.outcomes(t, job)["missed/paused"] >= 2
	})
	effectsPaused := e.count(t, `SELECT count(*) FROM effects`)
	okPaused := e.outcomes(t, job)["ok"]
	if effectsPaused != okPaused {
		t.Errorf("%d effects, %d ok fires", effectsPaused, okPaused)
	}
	if err := a.Resume(ctx, job, "alice", "incident 42 over"); err != nil {
		t.Fatal(err)
	}
	coordtest.Until(t, 10*time.Second, 50*time.Millisecond, "fires after resume", func() bool {
		return e.outcomes(t, job)["ok"] >= okPaused+2
	})

	id, err := a.Trigger(ctx, job, "bob", "rerun the report")
	if err != nil {
		t.Fatal(err)
	}
	coordtest.Until(t, 10*time.Second, 50*time.Millisecond, "the manual fire", func() bool {
		return e.count(t, `SELECT count(*) FROM coord_schedule_fires WHERE kind = 'manual' AND outcome = 'ok'`) == 1 &&
			e.count(t, `SELECT count(*) FROM coord_schedule_requests WHERE id = $1 AND done_at IS NOT NULL`, id) == 1
	})

	if err := a.Pause(ctx, job, "carol", "hold while skipping"); err != nil {
		t.Fatal(err)
	}
	skipped, err := a.SkipNext(ctx, job, "carol", "maintenance window")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Resume(ctx, job, "carol", "go on"); err != nil {
		t.Fatal(err)
	}
	coordtest.Until(t, 10*time.Second, 50*time.Millisecond, "a fire after the skipped one", func() bool {
		return e.count(t, `SELECT count(*) FROM coord_schedule_fires WHERE job = $1 AND local_time > $2 AND outcome = 'ok'`, job, skipped.Local) >= 1
	})
	if n := e.count(t, `SELECT count(*) FROM effects WHERE key = $1`, skipped.Key()); n != 0 {
		t.Errorf("the skipped fire %s ran", skipped)
	}

	var from, to time.Time
	if err := e.pool.QueryRow(ctx, `SELECT min(nominal), max(nominal) + interval '1 microsecond' FROM coord_schedule_fires
		WHERE job = $1 AND outcome = 'missed'`, job).Scan(&from, &to); err != nil {
		t.Fatal(err)
	}
	missed := e.outcomes(t, job)["missed/paused"]
	for i := range 2 {
		bid, err := a.Backfill(ctx, job, from, to, "dave", "the paused reports")
		if err != nil {
			t.Fatal(err)
		}
		coordtest.Until(t, 10*time.Second, 50*time.Millisecond, "the backfill done", func() bool {
			return e.count(t, `SELECT count(*) FROM coord_schedule_requests WHERE id = $1 AND done_at IS NOT NULL`, bid) == 1
		})
		if n := e.count(t, `SELECT count(*) FROM coord_schedule_fires WHERE kind = 'backfill' AND outcome = 'ok'`); n != missed {
			t.Errorf("backfill %d: %d backfilled fires, want the %d missed ones", i+1, n, missed)
		}
	}
	if n, f := e.count(t, `SELECT count(*) FROM effects`), e.count(t, `SELECT count(*) FROM coord_schedule_fires WHERE outcome = 'ok'`); n != f {
		t.Errorf("%d effects, %d ok fires", n, f)
	}
	for verb, want := range map[string]int{"pause": 2, "resume": 2, "trigger": 1, "skip_next": 1, "backfill": 2} {
		if n := e.count(t, `SELECT count(*) FROM coord_schedule_audit WHERE verb = $1 AND actor <> '' AND reason <> ''`, verb); n != want {
			t.Errorf("%d audit rows for %s, want %d", n, verb, want)
		}
	}
	list, err := a.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Job != job || list[0].NextNominal.IsZero() || list[0].LastOutcome == "" || list[0].LastSuccessAt.IsZero() {
		t.Errorf("List = %+v", list)
	}
	if err := a.Pause(ctx, "nope", "x", "y"); err == nil || !errorsIs(err, ErrUnknownJob) {
		t.Errorf("Pause of an unknown job: %v", err)
	}
	if err := a.Pause(ctx, job, "", "y"); err == nil || !strings.Contains(err.Error(), "actor") {
		t.Errorf("Pause without an actor: %v", err)
	}
}

// TestVerbsJoinTheCallersTransaction: a verb's Tx variant commits or rolls
// back with the caller's transaction, its audit row with it; JobGet reads one
// job and says ErrNotFound for none.
func TestVerbsJoinTheCallersTransaction(t *testing.T) {
	e := newEnv(t)
	r := e.start(t, Config{}, Job{Name: "report", Every: time.Hour, Handler: effect})
	e.waitRegistered(t, "report")
	a, ctx := r.s.Admin, testCtx(t)
	for _, commit := range []bool{false, true} {
		tx, err := e.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.PauseTx(ctx, tx, "report", "erin", "in the caller's transaction"); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		st, err := a.JobGet(ctx, e.pool, "report")
		if err != nil {
			t.Fatal(err)
		}
		if st.Paused != commit || e.count(t, `SELECT count(*) FROM coord_schedule_audit WHERE verb = 'pause'`) != map[bool]int{false: 0, true: 1}[commit] {
			t.Errorf("commit %t: paused %t, audit rows %d", commit, st.Paused, e.count(t, `SELECT count(*) FROM coord_schedule_audit`))
		}
	}
	if _, err := a.JobGet(ctx, e.pool, "nope"); !errorsIs(err, ErrNotFound) {
		t.Errorf("JobGet of an unknown job: %v", err)
	}
}
