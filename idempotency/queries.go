package idempotency

// queries holds the SQL of a Store, built once with the quoted table name.
type queries struct {
	table              string
	lookup             string
	inFlight           string
	setLockTimeout     string
	restoreLockTimeout string
	tryLock            string
	waitLock           string
	insertCompleted    string
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
		// Do and DoTx serialize requests with the same key on a transaction-scoped
		// advisory lock (held until the transaction ends, so a duplicate waits for
		// the first request's commit or rollback). tryLock is the uncontended case:
		// no wait, so no lock_timeout to set.
		tryLock: `SELECT pg_try_advisory_xact_lock($1)`,
		// waitLock waits for the lock at most $2 (lock_timeout), restoring the
		// caller's lock_timeout afterwards. The subqueries are evaluated inside out
		// (they hold volatile functions, so the planner keeps them): stash and set,
		// then lock, then restore.
		waitLock: `SELECT set_config('lock_timeout', current_setting('coordkit.lock_timeout'), true)
			FROM (SELECT pg_advisory_xact_lock($1) AS locked
				FROM (SELECT set_config('coordkit.lock_timeout', current_setting('lock_timeout'), true) AS prev,
					set_config('lock_timeout', $2, true) AS cur) s
				WHERE s.cur IS NOT NULL) l`,
		// The key row is written once, completed, in the effect's transaction.
		insertCompleted: `INSERT INTO ` + table + ` (scope, idem_key, fingerprint, status, response_status,
			response_header, response_body, completed_at) VALUES ($1, $2, $3, 2, $4, $5, $6, now())`,
	}
}
