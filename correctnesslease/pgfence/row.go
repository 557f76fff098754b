package pgfence

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/pgschema"
)

// DefaultFenceColumn is the row fence column when RowSpec.FenceColumn is empty.
const DefaultFenceColumn = "fence"

// RowSpec describes a hot-path fenced single-statement UPDATE of the caller's own
// table. The table needs a fence column:
//
//	ALTER TABLE accounts ADD COLUMN fence bigint NOT NULL DEFAULT 0;
//
// A row fence orders tokens by revision alone, so every token that writes a row must
// come from the same etcd cluster (revisions are cluster-global).
type RowSpec struct {
	// Schema of the table. Default "": the connection's search_path.
	Schema string
	// Table to update. Required.
	Table string
	// Set lists the columns assigned, in the order of the values passed to Update.
	// At least one; must not name the fence column.
	Set []string
	// Key lists the columns compared for equality, in the order of the key values
	// passed to Update. At least one. They must identify one row (a primary or
	// unique key): with a non-unique key, Update reports success when any matching
	// row was updated, even if others were skipped because their fence is newer.
	Key []string
	// FenceColumn is the bigint column holding the revision of the newest token that
	// wrote the row. Default "fence".
	FenceColumn string
}

func (spec RowSpec) withDefaults() RowSpec {
	spec.FenceColumn = cmp.Or(spec.FenceColumn, DefaultFenceColumn)
	return spec
}

// validate checks a RowSpec after withDefaults. Errors are *ConfigError.
func (spec RowSpec) validate() error {
	if spec.Schema != "" {
		if ne := pgschema.CheckIdent("RowSpec.Schema", spec.Schema); ne != nil {
			return nameError(ne)
		}
	}
	if ne := pgschema.CheckIdent("RowSpec.Table", spec.Table); ne != nil {
		return nameError(ne)
	}
	if ne := pgschema.CheckIdent("RowSpec.FenceColumn", spec.FenceColumn); ne != nil {
		return nameError(ne)
	}
	if len(spec.Set) == 0 {
		return &ConfigError{Field: "RowSpec.Set", Reason: "at least one column is required"}
	}
	if len(spec.Key) == 0 {
		return &ConfigError{Field: "RowSpec.Key", Reason: "at least one column is required"}
	}
	seen := map[string]string{spec.FenceColumn: "fence"}
	for _, c := range spec.Set {
		if ne := pgschema.CheckIdent("RowSpec.Set", c); ne != nil {
			return nameError(ne)
		}
		if prev, dup := seen[c]; dup {
			return &ConfigError{Field: "RowSpec.Set", Reason: fmt.Sprintf("column %q already used as a %s column", c, prev)}
		}
		seen[c] = "set"
	}
	for _, c := range spec.Key {
		if ne := pgschema.CheckIdent("RowSpec.Key", c); ne != nil {
			return nameError(ne)
		}
		if seen[c] == "fence" {
			return &ConfigError{Field: "RowSpec.Key", Reason: fmt.Sprintf("the fence column %q cannot be a key", c)}
		}
	}
	return nil
}

// RowUpdater runs one prepared-shape fenced UPDATE. Build it once with
// Fence.RowUpdater and reuse it; it is safe for concurrent use.
type RowUpdater struct {
	f         *Fence
	table     string // for messages
	nSet      int
	nKey      int
	updateSQL string // UPDATE t SET c1=$1.., fence=$tok WHERE k1=$.. AND fence <= $tok
	probeSQL  string // SELECT count(*), max(fence) FROM t WHERE k1=$1..
}

// RowUpdater validates spec and builds its statements: identifiers quoted with
// pgx.Identifier, values always parameters. An invalid spec is a *ConfigError
// (ErrInvalidConfig); for an invalid name it unwraps to the *coord.NameError.
func (f *Fence) RowUpdater(spec RowSpec) (*RowUpdater, error) {
	spec = spec.withDefaults()
	if err := spec.validate(); err != nil {
		return nil, err
	}
	t := pgschema.Qualified(spec.Schema, spec.Table)
	fc := pgx.Identifier{spec.FenceColumn}.Sanitize()
	param := func(i int) string { return "$" + strconv.Itoa(i) }

	var up strings.Builder
	up.WriteString("UPDATE " + t + " SET ")
	n := 0
	for _, c := range spec.Set {
		n++
		up.WriteString(pgx.Identifier{c}.Sanitize() + " = " + param(n) + ", ")
	}
	tokParam := param(len(spec.Set) + len(spec.Key) + 1)
	up.WriteString(fc + " = " + tokParam + " WHERE ")
	var where, probeWhere []string
	for i, c := range spec.Key {
		n++
		where = append(where, pgx.Identifier{c}.Sanitize()+" = "+param(n))
		probeWhere = append(probeWhere, pgx.Identifier{c}.Sanitize()+" = "+param(i+1))
	}
	up.WriteString(strings.Join(where, " AND "))
	up.WriteString(" AND " + fc + " <= " + tokParam)

	return &RowUpdater{
		f:         f,
		table:     t,
		nSet:      len(spec.Set),
		nKey:      len(spec.Key),
		updateSQL: up.String(),
		probeSQL:  "SELECT count(*), max(" + fc + ") FROM " + t + " WHERE " + strings.Join(probeWhere, " AND "),
	}, nil
}

// SQL returns the UPDATE statement the updater runs, for review and logs.
func (u *RowUpdater) SQL() string { return u.updateSQL }

// Update sets the Set columns to set (in order) and the fence column to tok's
// revision on the rows whose Key columns equal key (in order), only where the fence
// column is <= tok's revision. One statement on the happy path; it blocks like any
// UPDATE on a locked row, and ctx cancels it. It returns the number of rows updated
// (> 0) and nil, or:
//   - a *coord.StaleTokenError (coord.ErrStaleToken) when the row exists but was
//     written with a newer token: step down, never retry; logged and counted in
//     coordkit.pgfence.rejected;
//   - ErrRowNotFound (wrapped) when no row has that key;
//   - ErrZeroToken, an argument-count error, or the database's error, wrapped.
func (u *RowUpdater) Update(ctx context.Context, db DBTX, tok coord.Token, key []any, set ...any) (int64, error) {
	if tok.IsZero() {
		return 0, ErrZeroToken
	}
	if len(key) != u.nKey || len(set) != u.nSet {
		return 0, fmt.Errorf("pgfence: update %s: got %d key and %d set values, want %d and %d", u.table, len(key), len(set), u.nKey, u.nSet)
	}
	args := make([]any, 0, u.nSet+u.nKey+1)
	args = append(append(append(args, set...), key...), tok.Revision())
	// A row that appears, or is fenced forward by tok's own lease, between the UPDATE
	// and the probe makes the outcome ambiguous; try again (fences only grow, so a
	// stale verdict is always final).
	for attempt := 0; ; attempt++ {
		tag, err := db.Exec(ctx, u.updateSQL, args...)
		if err != nil {
			return 0, fmt.Errorf("pgfence: fenced update of %s with %s: %w", u.table, tok, err)
		}
		if n := tag.RowsAffected(); n > 0 {
			return n, nil
		}
		var count int64
		var highest *int64
		if err := db.QueryRow(ctx, u.probeSQL, key...).Scan(&count, &highest); err != nil {
			return 0, fmt.Errorf("pgfence: probe %s after an unmatched fenced update: %w", u.table, err)
		}
		switch {
		case count == 0:
			return 0, fmt.Errorf("%w: update %s with %s", ErrRowNotFound, u.table, tok)
		case highest == nil:
			return 0, fmt.Errorf("pgfence: update %s: fence column is NULL; declare it NOT NULL DEFAULT 0", u.table)
		case *highest > tok.Revision():
			return 0, u.f.reject(ctx, tok, *highest)
		case attempt >= 2:
			return 0, fmt.Errorf("pgfence: update %s with %s: row changed under three consecutive attempts", u.table, tok)
		}
	}
}
