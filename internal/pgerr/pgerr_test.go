package pgerr_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/coordkit/coordkit/internal/pgerr"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestCodeReadsTheServersSQLSTATEThroughWrapping(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.Pool.Exec(ctx, "CREATE TABLE u (id int PRIMARY KEY); INSERT INTO u VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	_, err := db.Pool.Exec(ctx, "INSERT INTO u VALUES (1)")
	if got := pgerr.Code(fmt.Errorf("outer: %w", err)); got != pgerr.UniqueViolation {
		t.Fatalf("Code(wrapped unique violation) = %q, want %q (err %v)", got, pgerr.UniqueViolation, err)
	}
	_, err = db.Pool.Exec(ctx, "CREATE TABLE u (id int)")
	if got := pgerr.Code(err); got != pgerr.DuplicateTable {
		t.Fatalf("Code(duplicate table) = %q, want %q", got, pgerr.DuplicateTable)
	}
	for _, err := range []error{nil, errors.New("network"), context.Canceled} {
		if got := pgerr.Code(err); got != "" {
			t.Fatalf("Code(%v) = %q, want \"\"", err, got)
		}
	}
}
