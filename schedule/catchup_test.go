package schedule

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// outcomes returns the job's fire records as "outcome/reason" → count.
func (e *env) outcomes(t *testing.T, job string) map[string]int {
	t.Helper()
	rows, err := e.pool.Query(testCtx(t), `SELECT outcome || coalesce('/' || reason, ''), count(*)::int
		FROM coord_schedule_fires WHERE tenant = $1 AND job = $2 GROUP BY 1`, e.tenant, job)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	var k string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&k, &n}, func() error { out[k] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitRegistered waits until a scheduler has written the job's row.
func (e *env) waitRegistered(t *testing.T, job string) {
	coordtest.Until(t, 15*time.Second, 20*time.Millisecond, "job "+job+" registered by its owner", func() bool {
		return e.count(t, `SELECT count(*) FROM coord_schedule WHERE tenant = $1 AND job = $2`, e.tenant, job) == 1
	})
}

// TestCatchUpAfterTenIntervalsAway: a minute job whose schedulers were away
// for 10 minutes (the clock moved while none ran) comes back with exactly
// what its policy says, from the persisted last nominal time: with a 5-minute
// window the 4 oldest fires are missed (window) under every policy; of the 6
// inside it, CatchUpAll with MaxCatchUp 3 runs the newest 3 (3 missed:
// limit), CatchUpLatest runs 1 (5 superseded), CatchUpSkip runs none (6
// skipped). Never a burst of 10.
func TestCatchUpAfterTenIntervalsAway(t *testing.T) {
	for _, tc := range []struct {
		policy CatchUpPolicy
		want   map[string]int
	}{
		{CatchUpAll, map[string]int{"ok": 3, "missed/window": 4, "missed/limit": 3}},
		{CatchUpLatest, map[string]int{"ok": 1, "missed/window": 4, "missed/superseded": 5}},
		{CatchUpSkip, map[string]int{"missed/window": 4, "missed/skipped": 6}},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			t.Parallel() // each on its own etcd and schema; they mostly wait
			e := newEnv(t)
			clock := coordtest.NewFakeClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
			job := Job{Name: "minutely", Every: time.Minute, CatchUp: tc.policy, MaxCatchUp: 3, Window: 5 * time.Minute, Handler: effect}
			first := e.start(t, Config{Clock: clock}, job)
			e.waitRegistered(t, job.Name)
			first.stop(t)
			clock.Advance(10 * time.Minute)
			e.start(t, Config{Clock: clock}, job)
			total := 0
			for _, n := range tc.want {
				total += n
			}
			coordtest.Until(t, 20*time.Second, 50*time.Millisecond, fmt.Sprintf("%d fire records", total), func() bool {
				return e.count(t, `SELECT count(*) FROM coord_schedule_fires WHERE tenant = $1`, e.tenant) >= total
			})
			time.Sleep(200 * time.Millisecond) // nothing more may come
			if got := e.outcomes(t, job.Name); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("records %v, want %v", got, tc.want)
			}
			if n := e.count(t, `SELECT count(*) FROM effects`); n != tc.want["ok"] {
				t.Errorf("%d effects, want %d", n, tc.want["ok"])
			}
			var last time.Time
			if err := e.pool.QueryRow(testCtx(t), `SELECT last_nominal FROM coord_schedule WHERE job = $1`, job.Name).Scan(&last); err != nil {
				t.Fatal(err)
			}
			if want := clock.Now(); !last.Equal(want) {
				t.Errorf("last nominal %s, want %s (caught up)", last, want)
			}
		})
	}
}

// TestDSTEndToEnd: a half-hourly New York job driven by a fake clock across
// the autumn fold and the spring gap fires exactly as the policies say:
// FoldTwice 10 fires in the 5 hours from 00:00 EDT (01:00 and 01:30 twice),
// FoldOnce 8; GapRunAtEnd 8 fires in the 4 hours from 00:00 EST (02:00 and
// 02:30 fold into 03:00), GapSkip 8 fires and 2 misses recorded (dst_gap).
func TestDSTEndToEnd(t *testing.T) {
	for _, tc := range []struct {
		name      string
		start     time.Time
		hours     int
		fold      FoldPolicy
		gap       GapPolicy
		ok, gapMs int
	}{
		{"fold twice", time.Date(2026, 11, 1, 4, 0, 0, 0, time.UTC), 5, FoldTwice, GapRunAtEnd, 10, 0},
		{"fold once", time.Date(2026, 11, 1, 4, 0, 0, 0, time.UTC), 5, FoldOnce, GapRunAtEnd, 8, 0},
		{"gap run at end", time.Date(2026, 3, 8, 5, 0, 0, 0, time.UTC), 4, FoldOnce, GapRunAtEnd, 8, 0},
		{"gap skip", time.Date(2026, 3, 8, 5, 0, 0, 0, time.UTC), 4, FoldOnce, GapSkip, 8, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			clock := coordtest.NewFakeClock(tc.start)
			job := Job{Name: "halfhourly", Cron: "*/30 * * * *", Zone: "America/New_York", Fold: tc.fold, Gap: tc.gap,
				MaxCatchUp: 100, Window: 24 * time.Hour, Handler: effect}
			e.start(t, Config{Clock: clock}, job)
			e.waitRegistered(t, job.Name)
			for range tc.hours * 6 { // 10-minute steps
				clock.Advance(10 * time.Minute)
				time.Sleep(20 * time.Millisecond)
			}
			coordtest.Until(t, 20*time.Second, 50*time.Millisecond, fmt.Sprintf("%d fires", tc.ok), func() bool {
				return e.outcomes(t, job.Name)["ok"] >= tc.ok
			})
			time.Sleep(200 * time.Millisecond)
			want := map[string]int{"ok": tc.ok}
			if tc.gapMs > 0 {
				want["missed/dst_gap"] = tc.gapMs
			}
			if got := e.outcomes(t, job.Name); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("records %v, want %v", got, want)
			}
			if n := e.count(t, `SELECT count(DISTINCT key) FROM effects`); n != tc.ok {
				t.Errorf("%d distinct effects, want %d", n, tc.ok)
			}
		})
	}
}
