// Package pgerr reads PostgreSQL error codes (SQLSTATE) out of wrapped errors,
// and names the codes coordkit acts on.
package pgerr

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// SQLSTATE codes coordkit acts on.
const (
	UniqueViolation      = "23505"
	LockNotAvailable     = "55P03" // lock_timeout expired
	IdleInTransaction    = "25P03" // idle_in_transaction_session_timeout ended the session
	InvalidStatementName = "26000" // prepared statement does not exist
	DuplicateTable       = "42P07"
)

// Code returns the SQLSTATE of the first *pgconn.PgError in err's chain, or "" when
// the server did not answer with an error (a network error, a context error).
func Code(err error) string {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pe.Code
	}
	return ""
}
