package bench

import (
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// Round trips beside every Postgres figure. The pools of the Postgres benchmarks
// count the round trips of their connections on the wire (coordtest.RoundTrips:
// a flight of client bytes after the server's last answer), and opTimer charges
// each timed operation with the round trips made while it ran — the variants run
// one after another, so each one's count is its own. The benchmarks report them
// as "<variant>-rt" beside each "<variant>-p50-µs" and ratio: "do-rt 3, bare-rt 3".

// countedPool returns a pool of at most maxConns connections on db's schema,
// counting its round trips.
func countedPool(tb testing.TB, db *coordtest.PostgresDB, maxConns int32) (*pgxpool.Pool, *coordtest.RoundTrips) {
	tb.Helper()
	return db.CountingPool(tb, maxConns)
}

// opTimer times operations by variant and counts their round trips.
type opTimer struct {
	rt    *coordtest.RoundTrips
	d     map[string][]time.Duration
	trips map[string]int64
}

func newOpTimer(rt *coordtest.RoundTrips) *opTimer {
	return &opTimer{rt: rt, d: map[string][]time.Duration{}, trips: map[string]int64{}}
}

// time runs f as one operation of variant name.
func (t *opTimer) time(name string, f func() error) error {
	before := t.rt.Count()
	start := time.Now()
	err := f()
	t.d[name] = append(t.d[name], time.Since(start))
	t.trips[name] += t.rt.Count() - before
	return err
}

// p50 is the variant's median, in µs.
func (t *opTimer) p50(name string) float64 {
	d := slices.Clone(t.d[name])
	slices.Sort(d)
	return float64(d[len(d)/2]) / float64(time.Microsecond)
}

// roundTrips is the variant's mean round trips per operation.
func (t *opTimer) roundTrips(name string) float64 {
	return float64(t.trips[name]) / float64(len(t.d[name]))
}

// report reports base's p50 and round trips, and for each of names its p50, its
// round trips and its p50 ratio to base.
func (t *opTimer) report(b *testing.B, base string, names ...string) {
	b.ReportMetric(t.p50(base), base+"-p50-µs")
	b.ReportMetric(t.roundTrips(base), base+"-rt")
	for _, n := range names {
		b.ReportMetric(t.p50(n), n+"-p50-µs")
		b.ReportMetric(t.roundTrips(n), n+"-rt")
		b.ReportMetric(t.p50(n)/t.p50(base), n+"/"+base)
	}
}
