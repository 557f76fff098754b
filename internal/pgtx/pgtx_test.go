package pgtx_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/internal/pgtx"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// A connection left in an open or an aborted transaction is rolled back — even
// with a cancelled context — and the locks it held are free again.
func TestRollbackConnEndsTheTransactionAndFreesItsLocks(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct{ name, then string }{
		{"open", "SELECT 1"},
		{"aborted", "SELECT 1/0"},
	} {
		conn, err := pgx.Connect(ctx, db.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "BEGIN; SELECT pg_advisory_xact_lock(42)"); err != nil {
			t.Fatal(err)
		}
		_, _ = conn.Exec(ctx, tc.then)
		if st := conn.PgConn().TxStatus(); st == 'I' {
			t.Fatalf("%s: setup left no transaction", tc.name)
		}
		done, stop := context.WithCancel(ctx)
		stop()
		pgtx.RollbackConn(done, conn)
		if st := conn.PgConn().TxStatus(); st != 'I' {
			t.Fatalf("%s: TxStatus after RollbackConn = %c, want I", tc.name, st)
		}
		var free bool
		if err := db.Pool.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock(42)").Scan(&free); err != nil || !free {
			t.Fatalf("%s: lock still held after RollbackConn (%v)", tc.name, err)
		}
	}
}

// A positive duration never renders as 0 ("no timeout"); whole milliseconds stay.
func TestMillisRoundsUp(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0", time.Nanosecond: "1", time.Millisecond: "1", 1500 * time.Microsecond: "2", 2 * time.Second: "2000",
	} {
		if got := pgtx.Millis(d); got != want {
			t.Errorf("Millis(%v) = %q, want %q", d, got, want)
		}
	}
}
