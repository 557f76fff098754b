package reliability

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/schedule"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// schedRecord is one row of the fires table.
type schedRecord struct {
	job, outcome, reason string
	local                time.Time
	fold                 int
	nominal, recorded    time.Time
}

// schedCheck holds a run to its claims: effects = distinct fire identities
// (no effect twice, none without its record, no record without its effect);
// every scheduled fire from each job's first one up to the cut is recorded,
// and the ones that did not run were missed for a recorded reason outside
// the catch-up window (none inside it); and it reports the fire lag in
// steady state and across the faults.
func schedCheck(t *testing.T, v *schedVerdict, db *coordtest.PostgresDB, run schedRun, ws []*schedWorker) {
	ctx := context.Background()
	var effects, distinct int64
	if err := db.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT key) FROM effects`).Scan(&effects, &distinct); err != nil {
		t.Fatal(err)
	}
	v.outcome["effects"], v.outcome["effects of one fire twice"] = effects, effects-distinct
	if effects != distinct {
		v.violate("%d effects for %d distinct fires: %d duplicates", effects, distinct, effects-distinct)
	}
	rows, err := db.Pool.Query(ctx, `SELECT job, outcome, coalesce(reason, ''), local_time, fold, nominal, recorded_at
		FROM coord_schedule_fires WHERE tenant = $1 ORDER BY job, nominal`, run.tenant)
	if err != nil {
		t.Fatal(err)
	}
	var recs []schedRecord
	for rows.Next() {
		var r schedRecord
		if err := rows.Scan(&r.job, &r.outcome, &r.reason, &r.local, &r.fold, &r.nominal, &r.recorded); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	okKeys := map[string]bool{}
	byJob := map[string]map[string]schedRecord{}
	for _, r := range recs {
		id := schedule.ID{Tenant: run.tenant, Job: r.job, Local: r.local, Fold: r.fold}
		if byJob[r.job] == nil {
			byJob[r.job] = map[string]schedRecord{}
		}
		byJob[r.job][id.Key()] = r
		if r.outcome == "ok" {
			okKeys[id.Key()] = true
			v.outcome["fires"]++
		} else {
			v.outcome[r.outcome+" ("+r.reason+")"]++
		}
	}
	// Effects and ok records: the same set.
	erows, err := db.Pool.Query(ctx, `SELECT DISTINCT key FROM effects`)
	if err != nil {
		t.Fatal(err)
	}
	for erows.Next() {
		var k string
		if err := erows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		if !okKeys[k] {
			v.violate("effect %s has no ok fire record", k)
		}
		delete(okKeys, k)
	}
	for k := range okKeys {
		v.violate("fire %s recorded ok without its effect", k)
	}
	// Every scheduled fire up to the cut, job by job.
	cut := v.stopped.Add(-run.every - 2*time.Second)
	if run.cron != "" {
		cut = run.clockStart.Add(time.Duration(float64(v.stopped.Sub(v.clockBase)-3*time.Second) * run.speed))
	}
	for j := range run.jobs {
		name := fmt.Sprintf("j%d", j)
		mine := byJob[name]
		if len(mine) == 0 {
			v.violate("job %s never fired", name)
			continue
		}
		first := time.Time{}
		for _, r := range mine {
			if first.IsZero() || r.nominal.Before(first) {
				first = r.nominal
			}
		}
		job := schedule.Job{Name: name, Every: run.every, Cron: run.cron, Zone: run.zone,
			Fold: schedule.FoldPolicy(run.fold), Gap: schedule.GapPolicy(run.gap)}
		if run.cron == "" {
			job.Zone, job.Fold, job.Gap = "", "", ""
		}
		if run.fold == "mix" {
			job.Fold = []schedule.FoldPolicy{schedule.FoldOnce, schedule.FoldTwice, schedule.FoldLast}[j%3]
		}
		if run.gap == "mix" {
			job.Gap = []schedule.GapPolicy{schedule.GapRunAtEnd, schedule.GapSkip}[j%2]
		}
		var want []schedule.Fire
		for after := first.Add(-time.Nanosecond); after.Before(cut); {
			more, err := schedule.Preview(job, after, 500)
			if err != nil {
				t.Fatal(err)
			}
			if len(more) == 0 {
				break
			}
			want, after = append(want, more...), more[len(more)-1].Nominal
		}
		for _, f := range want {
			if f.Nominal.After(cut) {
				break
			}
			f.ID.Tenant = run.tenant
			r, ok := mine[f.Key()]
			switch {
			case !ok:
				v.violate("fire %s (due %s) neither ran nor was recorded missed", f.ID, f.Nominal.Format(time.RFC3339Nano))
			case r.outcome == "missed" && r.reason != "window":
				v.violate("fire %s missed (%s) inside the catch-up window", f.ID, r.reason)
			case r.outcome != "ok" && r.outcome != "missed":
				v.violate("fire %s recorded %s (%s)", f.ID, r.outcome, r.reason)
			}
			delete(mine, f.Key())
		}
		for k, r := range mine {
			switch {
			case r.outcome == "missed" && r.reason == "dst_gap" && job.Gap == schedule.GapSkip:
				v.outcome["recorded misses in DST gaps (GapSkip)"]++
			case !r.nominal.After(cut):
				v.violate("fire %s (%s %s) is not a scheduled fire of %s", k, r.outcome, r.reason, name)
			}
		}
	}
	if run.cron == "" {
		schedLag(v, recs)
	}
	for _, w := range ws {
		out := w.proc.Output()
		v.outcome["fires rejected by the fence (stale token)"] += int64(strings.Count(out, "\nFENCED "))
		v.outcome["fires found recorded already (the key)"] += int64(strings.Count(out, "\nDUP "))
	}
}

// schedLag reports the lag, nominal → the fire's transaction, of fires due
// outside every fault's span (steady state) and inside one (failovers).
func schedLag(v *schedVerdict, recs []schedRecord) {
	var steady, faulted []time.Duration
	for _, r := range recs {
		if r.outcome != "ok" {
			continue
		}
		lag := r.recorded.Sub(r.nominal)
		if slices.ContainsFunc(v.spans, func(s schedSpan) bool { return !r.nominal.Before(s.from) && r.nominal.Before(s.to) }) {
			faulted = append(faulted, lag)
		} else {
			steady = append(steady, lag)
		}
	}
	pct := func(ds []time.Duration, p float64) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		slices.Sort(ds)
		return ds[min(len(ds)-1, int(float64(len(ds))*p))]
	}
	v.notes = append(v.notes, fmt.Sprintf("lag nominal → transaction: steady p50 %s p99 %s (%d fires); in fault spans p99 %s max %s (%d fires)",
		pct(steady, 0.5).Round(time.Millisecond), pct(steady, 0.99).Round(time.Millisecond), len(steady),
		pct(faulted, 0.99).Round(time.Millisecond), pct(faulted, 1).Round(time.Millisecond), len(faulted)))
	v.outcome["steady lag p99 ms"] = pct(steady, 0.99).Milliseconds()
	v.outcome["failover lag max ms"] = pct(faulted, 1).Milliseconds()
}
