// Package audit is coordctl's audit trail: a versioned table (through the SDK's
// schema layer, so coordkit_migrations records it beside the components it
// administers) with one row per mutation an operator asked for.
package audit

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/internal/pgschema"
)

// DefaultTable is the audit table's name.
const DefaultTable = "coordctl_audit"

// Limits on the text an entry records, in bytes.
const (
	MaxActorBytes  = 256
	MaxReasonBytes = 1024
)

// Outcomes of an entry.
const (
	Applied  = "applied"
	Conflict = "conflict"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Names derived from the table's.
var (
	targetIdx          = pgschema.Derived{Suffix: "_target_idx", What: "target index"}
	appendOnly         = pgschema.Derived{Suffix: "_append_only", What: "trigger"}
	appendOnlyTruncate = pgschema.Derived{Suffix: "_append_only_truncate", What: "trigger"}
	appendOnlyFn       = pgschema.Derived{Suffix: "_refuse_change", What: "trigger function"}
)

// ErrInvalid matches every *InputError.
var ErrInvalid = errors.New("coordctl: invalid audit input")

// InputError is an actor or reason the audit table would not record faithfully.
type InputError struct {
	Field, Reason string
}

// Error names the field and what is wrong with it.
func (e *InputError) Error() string { return "coordctl: invalid " + e.Field + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InputError) Is(target error) bool { return target == ErrInvalid }

// ErrNotMigrated says the audit table is missing or older than this coordctl:
// mutations refuse to run without it.
var ErrNotMigrated = errors.New("coordctl: the audit table is not migrated: run `coordctl migrate` (needs CREATE on the schema)")

// Trail writes and reads the audit table.
type Trail struct {
	table  string // quoted
	name   string // unquoted, for the grants
	schema pgschema.Component
}

// New returns the trail of table (DefaultTable when "") in schema ("" = the
// search_path's). An invalid name is a *coord.NameError.
func New(schema, table string) (*Trail, error) {
	if table == "" {
		table = DefaultTable
	}
	if err := pgschema.CheckTable(schema, table, targetIdx, appendOnly, appendOnlyTruncate, appendOnlyFn); err != nil {
		return nil, err
	}
	ms, err := pgschema.Load(migrationFS, "migrations", map[string]string{
		"audit":                pgschema.Qualified(schema, table),
		"target_idx":           pgschema.Quoted(table + targetIdx.Suffix),
		"append_only":          pgschema.Quoted(table + appendOnly.Suffix),
		"append_only_truncate": pgschema.Quoted(table + appendOnlyTruncate.Suffix),
		"append_only_fn":       pgschema.Qualified(schema, table+appendOnlyFn.Suffix),
	})
	if err != nil {
		return nil, fmt.Errorf("coordctl: %w", err)
	}
	return &Trail{
		table:  pgschema.Qualified(schema, table),
		name:   table,
		schema: pgschema.Component{Owner: "coordctl", Kind: "coordctl_audit", Schema: schema, Name: table, Migrations: ms},
	}, nil
}

// Migrate creates or upgrades the audit table (advisory-locked, versioned).
func (t *Trail) Migrate(ctx context.Context, db pgschema.Beginner) error {
	return t.schema.Migrate(ctx, db)
}

// MigrationSQL returns the table's migrations as plain SQL, one per version.
func (t *Trail) MigrationSQL() []string { return t.schema.SQL() }

// Ready returns ErrNotMigrated unless the table is at this coordctl's version.
func (t *Trail) Ready(ctx context.Context, db pgschema.DBTX) error {
	applied, latest, err := t.schema.Version(ctx, db)
	if err != nil {
		return err
	}
	if applied < latest {
		return fmt.Errorf("%w (table %s at version %d of %d)", ErrNotMigrated, t.table, applied, latest)
	}
	return nil
}

// Entry is one audit row.
type Entry struct {
	ID      int64           `json:"id"`
	At      time.Time       `json:"at"`
	Actor   string          `json:"actor"`
	Via     string          `json:"via"`
	DBUser  string          `json:"db_user"`
	Action  string          `json:"action"`
	Target  string          `json:"target"`
	Reason  string          `json:"reason"`
	Outcome string          `json:"outcome"`
	Rows    *int64          `json:"rows,omitempty"` // a bulk change: how many objects it acted on
	Before  json.RawMessage `json:"before"`
	After   json.RawMessage `json:"after,omitempty"`
}

// CheckActor refuses an actor the table would not keep as given: empty, over
// MaxActorBytes, invalid UTF-8, NUL or other control characters. It returns an
// *InputError.
func CheckActor(s string) error { return checkText("actor", s, MaxActorBytes, false) }

// CheckReason is CheckActor for a reason (MaxReasonBytes; newlines and tabs
// allowed).
func CheckReason(s string) error { return checkText("reason", s, MaxReasonBytes, true) }

func checkText(field, s string, maxBytes int, multiline bool) error {
	bad := func(reason string) error { return &InputError{Field: field, Reason: reason} }
	switch {
	case s == "":
		return bad("empty (say who and why: it goes into the audit table)")
	case len(s) > maxBytes:
		return bad(fmt.Sprintf("%d bytes, over the limit of %d", len(s), maxBytes))
	case !utf8.ValidString(s):
		return bad("not valid UTF-8")
	}
	for _, r := range s {
		if multiline && (r == '\n' || r == '\t') {
			continue
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return bad(fmt.Sprintf("control character %U", r))
		}
	}
	return nil
}

// Record inserts e (ID, At and DBUser are set by the database) in tx and returns
// its id and time. before and after are marshalled to JSON; strings in them
// that jsonb cannot hold (NUL) become U+FFFD.
func (t *Trail) Record(ctx context.Context, tx pgx.Tx, e Entry, before, after any) (int64, time.Time, error) {
	if err := CheckActor(e.Actor); err != nil {
		return 0, time.Time{}, err
	}
	if err := CheckReason(e.Reason); err != nil {
		return 0, time.Time{}, err
	}
	b, err := jsonb(before)
	if err != nil {
		return 0, time.Time{}, err
	}
	var a []byte
	if after != nil {
		if a, err = jsonb(after); err != nil {
			return 0, time.Time{}, err
		}
	}
	var id int64
	var at time.Time
	err = tx.QueryRow(ctx, "INSERT INTO "+t.table+" (actor, via, action, target, reason, outcome, before, after, rows) "+
		"VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id, at",
		e.Actor, e.Via, e.Action, e.Target, e.Reason, e.Outcome, string(b), nullable(a), e.Rows).Scan(&id, &at)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("coordctl: audit %s %s: %w", e.Action, e.Target, err)
	}
	return id, at, nil
}

// ListOpts filters List.
type ListOpts struct {
	Target string // only this target; "" any
	Actor  string // only this actor; "" any
	Before int64  // only rows older than this id (keyset: the last id shown); 0 none
	Limit  int    // default 50
}

// List returns audit rows newest first.
func (t *Trail) List(ctx context.Context, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, o ListOpts) ([]Entry, error) {
	if o.Limit <= 0 {
		o.Limit = 50
	}
	rows, err := db.Query(ctx, "SELECT id, at, actor, via, db_user, action, target, reason, outcome, rows, before, after FROM "+t.table+
		" WHERE ($1 = '' OR target = $1) AND ($2 = '' OR actor = $2) AND ($3 = 0 OR id < $3) ORDER BY id DESC LIMIT $4", o.Target, o.Actor, o.Before, o.Limit)
	if err != nil {
		return nil, fmt.Errorf("coordctl: audit list: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Entry, error) {
		var e Entry
		var before, after []byte
		err := r.Scan(&e.ID, &e.At, &e.Actor, &e.Via, &e.DBUser, &e.Action, &e.Target, &e.Reason, &e.Outcome, &e.Rows, &before, &after)
		e.Before, e.After = before, after
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("coordctl: audit list: %w", err)
	}
	return out, nil
}

// GrantsSQL returns the statements that make the audit table append-only for
// role, the role coordctl connects as: it may read and insert (and use the id
// sequence), nothing else; PUBLIC gets nothing. Run them as the table's owner
// (coordctl migrate --grants ROLE). The owner itself is held by the table's
// trigger (migration 2), which refuses UPDATE, DELETE and TRUNCATE to every role.
func (t *Trail) GrantsSQL(role string) ([]string, error) {
	if err := pgschema.CheckIdent("role", role); err != nil {
		return nil, &InputError{Field: "role", Reason: err.Error()}
	}
	r := pgschema.Quoted(role)
	seq := pgschema.Qualified(t.schema.Schema, t.name+"_id_seq")
	return []string{
		"REVOKE ALL ON " + t.table + " FROM PUBLIC",
		"REVOKE ALL ON " + t.table + " FROM " + r,
		"GRANT SELECT, INSERT ON " + t.table + " TO " + r,
		"REVOKE ALL ON SEQUENCE " + seq + " FROM " + r,
		"GRANT USAGE ON SEQUENCE " + seq + " TO " + r,
	}, nil
}

func jsonb(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("coordctl: audit: %w", err)
	}
	return replaceNULEscapes(b), nil
}

// replaceNULEscapes turns every \u0000 escape of the JSON text b (which jsonb
// refuses) into \ufffd, leaving an escaped backslash followed by "u0000" alone.
func replaceNULEscapes(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) && string(b[i+2:i+6]) == "0000" {
			out = append(out, `\ufffd`...)
			i += 5
			continue
		}
		out = append(out, b[i], b[i+1]) // any other escape, \\ included
		i++
	}
	return out
}

func nullable(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}
