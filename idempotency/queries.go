package idempotency

import (
	"encoding/hex"
	"fmt"
	"time"
)

// queries holds the SQL of a Store, built once with the quoted table name.
type queries struct {
	table              string
	lookup             string
	inFlight           string
	setLockTimeout     string
	restoreLockTimeout string
	insertClaim        string
	complete           string
}

const lookupCols = `fingerprint, status, response_status, response_header, response_body`

func newQueries(table string) queries {
	return queries{
		table:  table,
		lookup: `SELECT ` + lookupCols + ` FROM ` + table + ` WHERE scope = $1 AND idem_key = $2`,
		// Only for a key in progress: how long its lock lasts and how old it is, ms.
		inFlight: `SELECT COALESCE(GREATEST((extract(epoch FROM locked_until - now()) * 1000)::bigint, 0), 0),
			GREATEST((extract(epoch FROM now() - created_at) * 1000)::bigint, 0)
			FROM ` + table + ` WHERE scope = $1 AND idem_key = $2`,
		// The caller's lock_timeout is stashed in a transaction-local custom setting
		// and restored right after the claim, so the effect runs with the caller's.
		setLockTimeout: `SELECT set_config('coordkit.lock_timeout', current_setting('lock_timeout'), true),
			set_config('lock_timeout', $1, true)`,
		restoreLockTimeout: `SELECT set_config('lock_timeout', current_setting('coordkit.lock_timeout'), true)`,
		// One statement sets the bounded lock wait and inserts the key.
		insertClaim: `INSERT INTO ` + table + ` (scope, idem_key, fingerprint, status, locked_until)
			SELECT $1, $2, $3, 1, now() + $4::bigint * interval '1 millisecond'
			FROM (SELECT set_config('coordkit.lock_timeout', current_setting('lock_timeout'), true) AS prev,
				set_config('lock_timeout', $5, true) AS cur) s
			WHERE s.cur IS NOT NULL
			ON CONFLICT DO NOTHING`,
		// Touches no indexed column (locked_until stays as claimed; status is not
		// indexed), so Postgres can store the response as a HOT update.
		complete: `UPDATE ` + table + ` SET status = 2, response_status = $3, response_header = $4,
			response_body = $5, updated_at = now(), completed_at = now()
			WHERE scope = $1 AND idem_key = $2`,
	}
}

// claimStmt is the statement Do prepares once per connection and EXECUTEs inside
// its BEGIN: it bounds the lock wait, inserts the key row and, once inserted,
// restores the caller's lock_timeout (RETURNING runs only for an inserted row, the
// only case in which the transaction goes on to run the effect). Values arrive as
// hex text, which needs no quoting rules.
func (q queries) claimStmt() string {
	return `INSERT INTO ` + q.table + ` (scope, idem_key, fingerprint, status, locked_until)
SELECT convert_from(decode($1::text, 'hex'), 'UTF8'), convert_from(decode($2::text, 'hex'), 'UTF8'), decode($3::text, 'hex'),
	1, now() + $4::bigint * interval '1 millisecond'
FROM (SELECT set_config('coordkit.lock_timeout', current_setting('lock_timeout'), true) AS prev,
	set_config('lock_timeout', $5::text, true) AS cur) s
WHERE s.cur IS NOT NULL
RETURNING set_config('lock_timeout', current_setting('coordkit.lock_timeout'), true)`
}

// beginClaim is the BEGIN of Do: one simple-protocol round trip that opens the
// transaction and executes the prepared claim statement name.
func (q queries) beginClaim(name string, key Key, fp Fingerprint, wait, lock time.Duration) string {
	return fmt.Sprintf(`BEGIN ISOLATION LEVEL READ COMMITTED; EXECUTE %s('%s', '%s', '%s', %d, '%dms')`,
		name, hex.EncodeToString([]byte(key.Scope)), hex.EncodeToString([]byte(key.ID)), hex.EncodeToString(fp[:]),
		lock.Milliseconds(), wait.Milliseconds())
}
