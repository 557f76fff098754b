package grpcidem_test

import (
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/idempotency/grpcidem"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// A store failure (here: the key table was never migrated) reaches the client as
// Unavailable with a fixed message — never the database's own error, which names
// users, databases and tables — and reaches the log with its cause, once.
func TestInterceptorHidesStoreErrorsAndLogsThem(t *testing.T) {
	db := coordtest.Postgres(t)
	store, err := idempotency.New(db.Pool, idempotency.Config{}) // no Migrate
	if err != nil {
		t.Fatal(err)
	}
	var logs coordtest.Buffer
	e := &env{pool: db.Pool, store: store,
		client: serve(t, db.Pool, store, grpcidem.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})}
	_, _, _, err = e.charge("k1", "100")
	st := status.Convert(err)
	if st.Code() != codes.Unavailable {
		t.Fatalf("store failure: %v, want Unavailable", err)
	}
	for _, leak := range []string{"does not exist", "relation", db.Schema, "SQLSTATE"} {
		if strings.Contains(st.Message(), leak) {
			t.Fatalf("status message %q leaks %q", st.Message(), leak)
		}
	}
	if !strings.Contains(st.Message(), "retry with the same key") {
		t.Fatalf("status message %q: want it to say the retry is safe", st.Message())
	}
	out := logs.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "does not exist") ||
		!strings.Contains(out, method) || !strings.Contains(out, "k1") {
		t.Fatalf("log %q: want one ERROR record with the method, the key and the cause", out)
	}
}
