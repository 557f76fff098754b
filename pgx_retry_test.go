package coordkit_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestConnClosedAfterASentRequestIsNotSafeToRetry: the connection is cut while a
// COMMIT's answer is on its way back — the transaction committed. pgx.Tx.Commit
// returns "conn closed" (pgconn.ErrConnClosed), which pgx before v5.13.0 marked
// safe to retry (pgconn.SafeToRetry true: this test failed on v5.12.0), so a retry
// layer trusting it (database/sql does) could run the work twice. coordkit
// classifies no database error by SafeToRetry: coord.Retryable answers false, and
// the packages that can see a COMMIT lost in flight say ErrCommitUnknown
// (pgfence: not retryable, TestExecCommitUnknown; idempotency: retryable, the key
// dedupes, TestAmbiguousCommitRetryIsExactlyOnce). This pins the dependency's answer too.
func TestConnClosedAfterASentRequestIsNotSafeToRetry(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := coordtest.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE TABLE sent_twice (n int)"); err != nil {
		t.Fatal(err)
	}

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO sent_twice VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	proxy.Delay(300 * time.Millisecond) // COMMIT's answer is held in the proxy
	cut := make(chan struct{})
	go func() {
		defer close(cut)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			var n int
			if err := db.Pool.QueryRow(ctx, "SELECT count(*) FROM sent_twice").Scan(&n); err == nil && n == 1 {
				break // committed on the server; the client has no answer yet
			}
		}
		proxy.Cut()
	}()
	first := tx.Commit(ctx)
	coordtest.Recv(t, cut, 30*time.Second, "the cut while COMMIT's answer was held")
	t.Logf("COMMIT: %v", first)
	var n int
	if err := db.Pool.QueryRow(ctx, "SELECT count(*) FROM sent_twice").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the COMMIT did not reach the server (%d rows, %v): the test cut too early", n, err)
	}
	if first == nil {
		t.Fatal("COMMIT succeeded although its answer was cut")
	}
	if pgconn.SafeToRetry(first) {
		t.Errorf("pgconn.SafeToRetry(%v) = true for a COMMIT that committed (pgx before v5.13.0)", first)
	}
	if coord.Retryable(first) {
		t.Errorf("coord.Retryable(%v) = true for a COMMIT that committed", first)
	}
}
