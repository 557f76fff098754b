package bench

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// pgfence benchmarks: the cost of fencing a write, against the same write unfenced,
// in the same loop iteration (order alternating), on the same Postgres, so load from
// elsewhere hits both alike and the ratios are same-run ratios:
//
//	cd bench && go test -run '^$' -bench 'Fence' -benchtime 3000x .
//
// FenceTx: BEGIN; UPDATE accounts; INSERT ledger; COMMIT — plain, and through
// pgfence.Exec (the same transaction plus GuardTx: one INSERT … ON CONFLICT DO UPDATE
// on the fence row). Target fenced/plain ≤ 1.25 (p50).
//
// FenceTxTimeouts: the same fenced transaction through pgfence.Exec with its
// default idle and lock timeouts (sent with the guard, same round trip) and with
// both disabled: the cost of bounding a frozen holder. Reported, no target.
//
// FenceRow: UPDATE accounts SET balance = $1 WHERE id = $2 — plain, and through a
// pgfence.RowUpdater (SET …, fence = $tok WHERE id = $2 AND fence <= $tok).
// Target fenced/plain ≤ 1.05 (p50).

func newFenceBench(b *testing.B) (*pgxpool.Pool, *pgfence.Fence, coord.Token) {
	db := coordtest.Postgres(b)
	ctx := context.Background()
	f, err := pgfence.New(pgfence.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Migrate(ctx, db.Pool); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `
		CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL, fence bigint NOT NULL DEFAULT 0);
		INSERT INTO accounts (id, balance) SELECT g, 0 FROM generate_series(1, 2) g;
		CREATE TABLE ledger (id bigserial PRIMARY KEY, account int NOT NULL, amount bigint NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	tok, err := coord.ParseToken("/tenants/bench/elections/billing@7")
	if err != nil {
		b.Fatal(err)
	}
	return db.Pool, f, tok
}

func fenceP50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// pairs runs a and b once per iteration, alternating which goes first, and reports
// each one's p50 and the ratio b/a.
func fencePairs(bm *testing.B, nameA, nameB string, a, b func() error) {
	da := make([]time.Duration, 0, bm.N)
	db := make([]time.Duration, 0, bm.N)
	timed := func(f func() error, into *[]time.Duration) {
		start := time.Now()
		if err := f(); err != nil {
			bm.Fatal(err)
		}
		*into = append(*into, time.Since(start))
	}
	bm.ResetTimer()
	for i := 0; i < bm.N; i++ {
		if i%2 == 0 {
			timed(a, &da)
			timed(b, &db)
		} else {
			timed(b, &db)
			timed(a, &da)
		}
	}
	bm.StopTimer()
	pa, pb := fenceP50(da), fenceP50(db)
	bm.ReportMetric(float64(pa.Microseconds()), nameA+"-p50-µs")
	bm.ReportMetric(float64(pb.Microseconds()), nameB+"-p50-µs")
	bm.ReportMetric(float64(pb)/float64(pa), "ratio-p50")
}

// fenceTxWork is the transaction FenceTx and FenceTxTimeouts measure.
func fenceTxWork(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance + 1 WHERE id = 1"); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO ledger (account, amount) VALUES (1, 1)")
	return err
}

func BenchmarkFenceTx(b *testing.B) {
	pool, f, tok := newFenceBench(b)
	ctx := context.Background()
	work := fenceTxWork
	plain := func() error { return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return work(ctx, tx) }) }
	fenced := func() error { return f.Exec(ctx, pool, tok, work) }
	for range 50 { // warm the pool and the statement caches
		if err := plain(); err != nil {
			b.Fatal(err)
		}
		if err := fenced(); err != nil {
			b.Fatal(err)
		}
	}
	fencePairs(b, "plain", "guardtx", plain, fenced)
}

func BenchmarkFenceTxTimeouts(b *testing.B) {
	pool, f, tok := newFenceBench(b)
	ctx := context.Background()
	untimed, err := pgfence.New(pgfence.Config{IdleTimeout: -1, LockTimeout: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	without := func() error { return untimed.Exec(ctx, pool, tok, fenceTxWork) }
	with := func() error { return f.Exec(ctx, pool, tok, fenceTxWork) }
	for range 50 {
		if err := without(); err != nil {
			b.Fatal(err)
		}
		if err := with(); err != nil {
			b.Fatal(err)
		}
	}
	fencePairs(b, "untimed", "timeouts", without, with)
}

func BenchmarkFenceRow(b *testing.B) {
	pool, f, tok := newFenceBench(b)
	ctx := context.Background()
	u, err := f.RowUpdater(pgfence.RowSpec{Table: "accounts", Set: []string{"balance"}, Key: []string{"id"}})
	if err != nil {
		b.Fatal(err)
	}
	var v int64
	plain := func() error {
		v++
		_, err := pool.Exec(ctx, "UPDATE accounts SET balance = $1 WHERE id = $2", v, 2)
		return err
	}
	fenced := func() error {
		v++
		_, err := u.Update(ctx, pool, tok, []any{2}, v)
		return err
	}
	for range 50 {
		if err := plain(); err != nil {
			b.Fatal(err)
		}
		if err := fenced(); err != nil {
			b.Fatal(err)
		}
	}
	fencePairs(b, "plain", "fenced", plain, fenced)
}
