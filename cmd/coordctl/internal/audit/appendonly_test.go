package audit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/audit"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestAuditTableIsAppendOnly (issue 29, point 5): the audit table could be
// updated or deleted by coordctl's own role. Now its trigger refuses UPDATE,
// DELETE and TRUNCATE even to the table's owner, and GrantsSQL leaves the role
// coordctl writes with SELECT and INSERT only: it records, it cannot rewrite.
func TestAuditTableIsAppendOnly(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	trail, err := audit.New("", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := trail.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	record := func(q interface {
		Begin(context.Context) (pgx.Tx, error)
	}) error {
		return pgx.BeginFunc(ctx, q, func(tx pgx.Tx) error {
			rows := int64(5000)
			_, _, err := trail.Record(ctx, tx, audit.Entry{Actor: "alice", Via: "cli", Action: "outbox.requeue.bulk", Target: "key=order-1",
				Reason: "broker fixed", Outcome: audit.Applied, Rows: &rows}, map[string]int{"count": 5000}, nil)
			return err
		})
	}
	if err := record(db.Pool); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{`UPDATE coordctl_audit SET actor = 'root'`, `DELETE FROM coordctl_audit`, `TRUNCATE coordctl_audit`} {
		if _, err := db.Pool.Exec(ctx, stmt); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s as the table's owner: %v, want the append-only trigger's refusal", stmt, err)
		}
	}
	es, err := trail.List(ctx, db.Pool, audit.ListOpts{})
	if err != nil || len(es) != 1 || es[0].Actor != "alice" || es[0].Rows == nil || *es[0].Rows != 5000 {
		t.Fatalf("the trail after the refused changes: %+v, %v", es, err)
	}

	// The role coordctl writes with, under GrantsSQL: select and insert, nothing else.
	role := "coordctl_writer_" + strings.ReplaceAll(db.Schema, "-", "_")
	if _, err := db.Pool.Exec(ctx, fmt.Sprintf(`CREATE ROLE %q`, role)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.Pool.Exec(c, fmt.Sprintf(`DROP OWNED BY %q`, role))
		_, _ = db.Pool.Exec(c, fmt.Sprintf(`DROP ROLE %q`, role))
	})
	grants, err := trail.GrantsSQL(role)
	if err != nil {
		t.Fatal(err)
	}
	grants = append(grants, fmt.Sprintf(`GRANT USAGE ON SCHEMA %q TO %q`, db.Schema, role))
	for _, g := range grants {
		if _, err := db.Pool.Exec(ctx, g); err != nil {
			t.Fatalf("%s: %v", g, err)
		}
	}
	asRole := func(fn func(tx pgx.Tx) error) error {
		return pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL ROLE %q`, role)); err != nil {
				return err
			}
			return fn(tx)
		})
	}
	if err := asRole(func(tx pgx.Tx) error {
		_, _, err := trail.Record(ctx, tx, audit.Entry{Actor: "bob", Via: "cli", Action: "saga.retry", Target: "order-7", Reason: "r", Outcome: audit.Applied}, "x", nil)
		return err
	}); err != nil {
		t.Fatalf("insert as the coordctl role: %v", err)
	}
	for _, stmt := range []string{`UPDATE coordctl_audit SET actor = 'root'`, `DELETE FROM coordctl_audit`, `TRUNCATE coordctl_audit`,
		`ALTER TABLE coordctl_audit DISABLE TRIGGER ALL`} {
		err := asRole(func(tx pgx.Tx) error { _, err := tx.Exec(ctx, stmt); return err })
		if err == nil || !(strings.Contains(err.Error(), "permission denied") || strings.Contains(err.Error(), "must be owner")) {
			t.Errorf("%s as the coordctl role: %v, want permission denied", stmt, err)
		}
	}
	if _, err := trail.GrantsSQL(`bad"role` + "\x00"); !errors.Is(err, audit.ErrInvalid) {
		t.Errorf("GrantsSQL of an invalid role = %v, want ErrInvalid", err)
	}
}
