package coordtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
)

// Tenant is unique per test and a valid tenant name; CountingEtcdClient counts
// the RPCs by method.
func TestTenantAndCountingClient(t *testing.T) {
	for _, name := range []string{"a", "b/c", strings.Repeat("x", 80)} {
		t.Run(name, func(t *testing.T) {
			if _, err := coord.TenantPrefix(Tenant(t)); err != nil {
				t.Fatalf("Tenant = %q: %v", Tenant(t), err)
			}
		})
	}
	cli, rc := CountingEtcdClient(t, Etcd(t).Endpoints...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		if _, err := cli.Get(ctx, fmt.Sprint("k", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := rc.Count("/Range"); n != 3 {
		t.Fatalf("Count(/Range) = %d after 3 gets, want 3", n)
	}
}

// IsInvalidName accepts a *ConfigError-shaped error for the field wrapping a
// *coord.NameError, and nothing else.
func TestIsInvalidName(t *testing.T) {
	ne := &coord.NameError{Field: "Table", Value: "a.b", Reason: "has a dot"}
	good := fmt.Errorf("pkg: invalid config Table: %w", ne)
	if !IsInvalidName(good, "Table") || IsInvalidName(good, "Schema") || IsInvalidName(fmt.Errorf("pkg: invalid config Table: bad"), "Table") {
		t.Fatal("IsInvalidName misjudges")
	}
}

// The example helpers give a pool on a schema of its own, and TextRows reads
// one-column rows.
func TestExamplePostgresAndTextRows(t *testing.T) {
	pool, done := ExamplePostgres()
	defer done()
	got := TextRows(t, pool, `SELECT (current_schema() LIKE 'example_%')::text UNION ALL SELECT 'two'`)
	if strings.Join(got, ",") != "true,two" {
		t.Fatalf("TextRows = %q", got)
	}
}
