package coord

import (
	"errors"
	"fmt"
	"strings"
)

// ErrSchemaMismatch: Migrate found tables of a component that no recorded
// migration created (made by a coordkit from before versioned migrations, or by
// someone else) and their shape is not the component's version 1, so it neither
// adopted them nor changed anything. Returned as *SchemaMismatchError by every
// Postgres package's Migrate and MigrateTx.
var ErrSchemaMismatch = errors.New("coord: existing tables do not match the schema's version 1")

// SchemaMismatchError reports the differences between existing tables and the
// component's version 1. It matches ErrSchemaMismatch.
type SchemaMismatchError struct {
	Component   string   // "outbox", "pgfence", "saga", ...
	Table       string   // the component's main table, quoted and qualified as configured
	Differences []string // one per difference: `column "payload": text here, bytea in version 1`
}

// Error names the table, the differences and the way out.
func (e *SchemaMismatchError) Error() string {
	return fmt.Sprintf("coord: existing tables do not match the schema's version 1: %s %s: %s "+
		"(nothing was changed; if these are coordkit's tables, bring them to version 1's shape "+
		"(MigrationSQL()[0]) and run Migrate again, which then records version 1; otherwise "+
		"configure another Table or Schema)", e.Component, e.Table, strings.Join(e.Differences, "; "))
}

// Is makes errors.Is(err, ErrSchemaMismatch) true.
func (e *SchemaMismatchError) Is(target error) bool { return target == ErrSchemaMismatch }

// Retryable is false: the tables stay as they are until someone changes them.
func (e *SchemaMismatchError) Retryable() bool { return false }
