package pgschema_test

import (
	"strings"
	"testing"

	"github.com/coordkit/coordkit/internal/pgschema"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestDottedTableSaysWhatToWrite: "billing.ob", which releases before v0.1 read as
// a schema and a table, is refused with the two fields to write instead.
func TestDottedTableSaysWhatToWrite(t *testing.T) {
	ne := pgschema.CheckTable("", "billing.ob")
	if ne == nil || !strings.Contains(ne.Error(), `write Schema: "billing", Table: "ob"`) {
		t.Fatalf(`CheckTable("", "billing.ob") = %v, want it to say: write Schema: "billing", Table: "ob"`, ne)
	}
	if ne := pgschema.CheckIdent("Schema", "a.b"); ne == nil || strings.Contains(ne.Error(), "write Schema") {
		t.Fatalf(`CheckIdent("Schema", "a.b") = %v, want a refusal without the Table advice`, ne)
	}
}

// TestLongTableSaysWhatToWrite: a name over 63 bytes, which releases before v0.1
// passed to PostgreSQL, is refused naming the table PostgreSQL really created —
// checked against the server, with a multi-byte character across the limit.
func TestLongTableSaysWhatToWrite(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx := testCtx(t)
	long := strings.Repeat("a", 62) + "éé_orders" // é is 2 bytes: the cut falls inside the first
	ne := pgschema.CheckTable("", long)
	if ne == nil {
		t.Fatal("a 73-byte table name was accepted")
	}
	if _, err := db.Pool.Exec(ctx, "CREATE TABLE "+pgschema.Quoted(long)+" (x int)"); err != nil {
		t.Fatal(err)
	}
	var created string
	if err := db.Pool.QueryRow(ctx, "SELECT relname FROM pg_class WHERE relname LIKE 'aaaa%' AND relnamespace = current_schema()::regnamespace").Scan(&created); err != nil {
		t.Fatal(err)
	}
	if want := `is named "` + created + `"`; !strings.Contains(ne.Error(), want) {
		t.Fatalf("CheckTable(long) = %v\nwant it to name the table PostgreSQL created: %s", ne, want)
	}
}
