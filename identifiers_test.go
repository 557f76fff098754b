package coordkit_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/saga"
	"github.com/coordkit/coordkit/schedule"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestOneIdentifierRule: every Postgres package judges a table or schema name the
// same way (internal/pgschema.CheckIdent) and reports a refusal the same way: a
// *ConfigError of the package, matching its ErrInvalidConfig, naming the field
// the caller set and unwrapping to a *coord.NameError.
func TestOneIdentifierRule(t *testing.T) {
	pool := coordtest.Postgres(t).Pool
	build := map[string]func(schema, table string) error{
		"pgfence": func(s, tb string) error { _, err := pgfence.New(pgfence.Config{Schema: s, Table: tb}); return err },
		"idempotency": func(s, tb string) error {
			_, err := idempotency.New(pool, idempotency.Config{Schema: s, Table: tb})
			return err
		},
		"outbox": func(s, tb string) error { _, err := outbox.New(outbox.Config{Schema: s, Table: tb}); return err },
		"inbox": func(s, tb string) error {
			_, err := outbox.NewInbox(outbox.InboxConfig{Schema: s, Table: tb})
			return err
		},
		"saga": func(s, tb string) error {
			c, err := saga.NewClient(pool, saga.Config{Schema: s, Table: tb})
			if err == nil {
				c.Close()
			}
			return err
		},
		"schedule": func(s, tb string) error {
			_, err := schedule.NewAdmin(pool, schedule.Config{Tenant: "t", Schema: s, Table: tb})
			return err
		},
		"barrier": func(s, tb string) error {
			_, err := saga.NewBarrier(saga.BarrierConfig{Schema: s, Table: tb})
			return err
		},
	}
	for _, tc := range []struct {
		schema, table string
		field         string // "" when the name is fine
	}{
		{"", `t"; DROP TABLE x; --`, ""},
		{"Mixed Schema", "ünïcode", ""},
		{"", "app.t", "Table"},
		{"", strings.Repeat("t", 64), "Table"},
		{"", "nul\x00", "Table"},
		{"", "bad\xff", "Table"},
		{"", "tab\tle", "Table"},
		{"a.b", "t", "Schema"},
		{strings.Repeat("s", 64), "t", "Schema"},
	} {
		for name, f := range build {
			err := f(tc.schema, tc.table)
			var ne *coord.NameError
			switch {
			case tc.field == "" && err != nil:
				t.Errorf("%s(%q, %q) = %v, want it accepted (names are quoted)", name, tc.schema, tc.table, err)
			case tc.field != "" && (!coordtest.IsInvalidName(err, tc.field) || !errors.As(err, &ne) || ne.Field != tc.field):
				t.Errorf("%s(%q, %q) = %v, want a *ConfigError for %s wrapping a *coord.NameError", name, tc.schema, tc.table, err, tc.field)
			}
		}
	}
}
