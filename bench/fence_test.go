package bench

import (
	"context"
	"io"
	"log/slog"
	"testing"

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
// pgfence.Exec (the same transaction plus the guard: one INSERT … ON CONFLICT DO
// UPDATE on the fence row, sent with BEGIN: 4 round trips each). Target
// guardtx/plain ≤ 1.1 (p50).
//
// FenceTxTimeouts: the same fenced transaction through pgfence.Exec with its
// default idle and lock timeouts (sent with the guard, same round trip) and with
// both disabled: the cost of bounding a frozen holder. Reported, no target.
//
// FenceRow: UPDATE accounts SET balance = $1 WHERE id = $2 — plain, and through a
// pgfence.RowUpdater (SET …, fence = $tok WHERE id = $2 AND fence <= $tok).
// Target fenced/plain ≤ 1.05 (p50).

func newFenceBench(b *testing.B) (*pgxpool.Pool, *coordtest.RoundTrips, *pgfence.Fence, coord.Token) {
	db := coordtest.Postgres(b)
	pool, rt := countedPool(b, db, 4)
	ctx := context.Background()
	f, err := pgfence.New(pgfence.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Migrate(ctx, pool); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL, fence bigint NOT NULL DEFAULT 0);
		INSERT INTO accounts (id, balance) SELECT g, 0 FROM generate_series(1, 2) g;
		CREATE TABLE ledger (id bigserial PRIMARY KEY, account int NOT NULL, amount bigint NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	tok, err := coord.ParseToken("/tenants/bench/elections/billing@7")
	if err != nil {
		b.Fatal(err)
	}
	return pool, rt, f, tok
}

// fencePairs runs a and b 50 times each, untimed, to warm the pool and the
// statement caches; then once per iteration, alternating which goes first, and
// reports each one's p50 and round trips and the ratio b/a ("<b>/<a>").
func fencePairs(bm *testing.B, rt *coordtest.RoundTrips, nameA, nameB string, a, b func() error) {
	for range 50 { // warm the pool and the statement caches
		if err := a(); err != nil {
			bm.Fatal(err)
		}
		if err := b(); err != nil {
			bm.Fatal(err)
		}
	}
	t := newOpTimer(rt)
	bm.ResetTimer()
	for i := 0; i < bm.N; i++ {
		first, second, f1, f2 := nameA, nameB, a, b
		if i%2 == 1 {
			first, second, f1, f2 = nameB, nameA, b, a
		}
		if err := t.time(first, f1); err != nil {
			bm.Fatal(err)
		}
		if err := t.time(second, f2); err != nil {
			bm.Fatal(err)
		}
	}
	bm.StopTimer()
	t.report(bm, nameA, nameB)
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
	pool, rt, f, tok := newFenceBench(b)
	ctx := context.Background()
	work := fenceTxWork
	plain := func() error { return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return work(ctx, tx) }) }
	fenced := func() error { return f.Exec(ctx, pool, tok, work) }
	fencePairs(b, rt, "plain", "guardtx", plain, fenced)
}

func BenchmarkFenceTxTimeouts(b *testing.B) {
	pool, rt, f, tok := newFenceBench(b)
	ctx := context.Background()
	untimed, err := pgfence.New(pgfence.Config{IdleTimeout: -1, LockTimeout: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	without := func() error { return untimed.Exec(ctx, pool, tok, fenceTxWork) }
	with := func() error { return f.Exec(ctx, pool, tok, fenceTxWork) }
	fencePairs(b, rt, "untimed", "timeouts", without, with)
}

func BenchmarkFenceRow(b *testing.B) {
	pool, rt, f, tok := newFenceBench(b)
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
	fencePairs(b, rt, "plain", "fenced", plain, fenced)
}
