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
	setLockTimeout     string
	restoreLockTimeout string
	insertClaim        string
	complete           string
}

const lookupCols = `fingerprint, status,
	COALESCE(GREATEST((extract(epoch FROM locked_until - now()) * 1000)::bigint, 0), 0),
	GREATEST((extract(epoch FROM now() - created_at) * 1000)::bigint, 0),
	response_status, response_header, response_body`

func newQueries(table string) queries {
	return queries{
		table:  table,
		lookup: `SELECT ` + lookupCols + ` FROM ` + table + ` WHERE scope = $1 AND idem_key = $2`,
		// The caller's lock_timeout is stashed in a transaction-local custom setting
		// and restored right after the claim, so the effect runs with the caller's.
		setLockTimeout: `SELECT set_config('coordkit.lock_timeout', current_setting('lock_timeout'), true),
			set_config('lock_timeout', $1, true)`,
		restoreLockTimeout: `SELECT set_config('lock_timeout', current_setting('coordkit.lock_timeout'), true)`,
		insertClaim: `INSERT INTO ` + table + ` (scope, idem_key, fingerprint, status, locked_until)
			VALUES ($1, $2, $3, 1, now() + $4::bigint * interval '1 millisecond') ON CONFLICT DO NOTHING`,
		complete: `UPDATE ` + table + ` SET status = 2, response_status = $3, response_header = $4,
			response_body = $5, locked_until = NULL, lock_token = NULL, updated_at = now(), completed_at = now()
			WHERE scope = $1 AND idem_key = $2`,
	}
}

// beginClaim is the BEGIN of Do: one simple-protocol round trip that opens the
// transaction, bounds the lock wait, inserts the key row (a unique violation means
// the key exists; lock_timeout means a duplicate is still running) and restores the
// lock timeout. Values are embedded as hex, which needs no quoting rules.
func (q queries) beginClaim(key Key, fp Fingerprint, wait, lock time.Duration) string {
	return fmt.Sprintf(`BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT set_config('coordkit.lock_timeout', current_setting('lock_timeout'), true), set_config('lock_timeout', '%dms', true);
INSERT INTO %s (scope, idem_key, fingerprint, status, locked_until) VALUES (%s, %s, %s, 1, now() + %d * interval '1 millisecond');
SELECT set_config('lock_timeout', current_setting('coordkit.lock_timeout'), true)`,
		wait.Milliseconds(), q.table, hexText(key.Scope), hexText(key.ID), hexBytes(fp[:]), lock.Milliseconds())
}

func hexText(s string) string { return "convert_from(" + hexBytes([]byte(s)) + ", 'UTF8')" }

func hexBytes(b []byte) string { return "decode('" + hex.EncodeToString(b) + "', 'hex')" }
