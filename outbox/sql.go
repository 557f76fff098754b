package outbox

// statements holds the SQL of an Outbox, built once with quoted table names.
type statements struct {
	insert, insertNotify           string
	insertBatch, insertBatchNotify string
	soloLease, keyedLease          string
	soloClaim, claim               string
	markPublished, deletePublished string
	fail, park                     string
	oldest, prune                  string
	relayGauge, presence           string
	parkedOne, parkedKey           string
	requeue, discard               string
}

// The transaction-local settings by which a batch's first statement hands its
// claim the relay lease it holds (leaseSolo, leaseKeyed, or the empty string
// when another relay's batch held it) and, keyed, the buckets it locked.
const (
	claimLease   = "coordkit.outbox_lease"
	claimBuckets = "coordkit.outbox_claim_buckets"
)

// claimable is the filter of rows a relay may claim: pending, of a key that is
// neither parked nor waiting for its head's retry (NOT IN over small sets:
// hashed once per statement).
func claimable(t, d string) string {
	return `o.published_at IS NULL
  AND o.aggregateid NOT IN (SELECT d.aggregateid FROM ` + d + ` d)
  AND o.aggregateid NOT IN (SELECT r.aggregateid FROM ` + t + ` r WHERE r.published_at IS NULL AND r.attempts > 0
                            AND r.next_attempt_at > clock_timestamp())`
}

// bucketWindow is the keyed statement's window ($4 buckets, $5 rows; nothing
// without the lease, l): the buckets with pending rows among the first $5, in
// the order of their oldest.
func bucketWindow(t, d string) string {
	return `SELECT hashtext(o.aggregateid) & ($4::int4 - 1) AS b, min(o.seq) AS first FROM (
    SELECT o.aggregateid, o.seq FROM ` + t + ` o
    WHERE (SELECT l.lease FROM l) = '` + leaseKeyed + `'
      AND ` + claimable(t, d) + `
    ORDER BY o.seq LIMIT $5) o
  GROUP BY 1 ORDER BY 2`
}

// batchSettings, first in a relay's transaction with the lease: custom plans
// always (a cached generic plan of the claim statements, which cannot see the
// batch size, can read every pending row), and a commit that
// does not wait for its flush (a mark lost in a server crash only means the
// batch is published again — at least once, the inbox absorbs it — so lower lag,
// no loss).
const batchSettings = `set_config('plan_cache_mode', 'force_custom_plan', true) IS NULL,
  set_config('synchronous_commit', 'off', true) IS NULL`

// leaseStatement takes the relay lease — $1: its class, $2: the table, whose
// oid is the key, so that same-named tables of two schemas do not share it —
// with try, the advisory lock function of the mode, and records what it got in
// claimLease.
func leaseStatement(try, mode string) string {
	return `SELECT set_config('` + claimLease + `', CASE WHEN ` + try + `($1::int4, $2::text::regclass::oid::int4) THEN '` + mode + `' ELSE '' END, true), ` + batchSettings
}

const cols = `id, aggregatetype, aggregateid, type, payload, payload_json, headers`

func buildStatements(t, d string) statements {
	var s statements
	// One round trip: take the per-key enqueue lock (so rows of one key commit in
	// seq order), optionally notify, insert.
	s.insert = `INSERT INTO ` + t + ` (` + cols + `)
SELECT $1, $2, $3, $4, $5, $6, $7::jsonb FROM (SELECT pg_advisory_xact_lock($8::int4, hashtext($3))) l`
	s.insertNotify = s.insert + `, (SELECT pg_notify($9, '')) n`
	batch := `WITH l AS MATERIALIZED (
  SELECT pg_advisory_xact_lock($8::int4, hashtext(k)) FROM (SELECT DISTINCT k FROM unnest($3::text[]) k ORDER BY k) s)
INSERT INTO ` + t + ` (` + cols + `)
SELECT u.i, u.a, u.k, u.ty, u.p, u.j, u.h FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bool[], $7::jsonb[])
  WITH ORDINALITY AS u(i, a, k, ty, p, j, h, ord), (SELECT count(*) FROM l) lc`
	s.insertBatch = batch + ` ORDER BY u.ord`
	s.insertBatchNotify = batch + `, (SELECT pg_notify($9, '')) n ORDER BY u.ord`

	s.soloLease = leaseStatement("pg_try_advisory_xact_lock", leaseSolo)
	// The solo claim (the lease held exclusively, so no other relay holds a key):
	// the pending rows in seq order, past the keys that are parked or whose head
	// waits for a retry; the LIMIT cuts the tail, so every key's rows are a prefix
	// from its head. Nothing without the lease (a one-time filter).
	s.soloClaim = `SELECT o.seq, o.id, o.aggregatetype, o.aggregateid, o.type, o.payload, o.headers::text, o.created_at, o.attempts,
  o.next_attempt_at <= clock_timestamp()
FROM ` + t + ` o
WHERE current_setting('` + claimLease + `') = '` + leaseSolo + `'
  AND ` + claimable(t, d) + `
ORDER BY o.seq LIMIT $1`

	// Keyed: the lease shared ($1, $2 as in leaseStatement), then up to $6 buckets
	// of keys ($4 buckets; a key's bucket is hashtext(key) & ($4 - 1)), locked with
	// try ($3: their class), in the order of their oldest pending row in a window
	// of the first $5 pending rows past the keys that are parked or whose head
	// waits for a retry: a bucket another relay holds is passed over. The window's
	// snapshot predates the locks, so it only chooses buckets; the claim (the next
	// statement, a fresh snapshot) decides what is pending. It hands the claim the
	// locked buckets through a transaction-local setting (both statements go in one
	// round trip) and returns how many buckets it locked and how many had rows in
	// the window: some with none locked means others held them all (the relay
	// retries shortly).
	s.keyedLease = `WITH l AS MATERIALIZED (
  SELECT CASE WHEN pg_try_advisory_xact_lock_shared($1::int4, $2::text::regclass::oid::int4) THEN '` + leaseKeyed + `' ELSE '' END AS lease),
c AS MATERIALIZED (` + bucketWindow(t, d) + `),
k AS MATERIALIZED (SELECT c.b FROM c WHERE pg_try_advisory_xact_lock($3::int4, c.b) LIMIT $6)
SELECT set_config('` + claimLease + `', (SELECT lease FROM l), true), ` + batchSettings + `,
  set_config('` + claimBuckets + `', coalesce((SELECT array_agg(k.b)::text FROM k), '{}'), true) IS NULL,
  (SELECT count(*) FROM k), (SELECT count(*) FROM c)`
	// With the buckets locked, a fresh snapshot: the pending rows of their keys in
	// seq order, past the keys that are parked or whose head waits for a retry; the
	// LIMIT cuts the tail, so every key's rows are a prefix from its head. No other
	// relay's batch holds these buckets, so whatever the previous holders committed
	// (marks, failures, parkings) is in this snapshot. The buckets are a hashed
	// subplan filter on the walk of the pending index ("IS TRUE" keeps PostgreSQL
	// from turning it into a semi-join). Nothing without the lease (a one-time
	// filter).
	s.claim = `SELECT o.seq, o.id, o.aggregatetype, o.aggregateid, o.type, o.payload, o.headers::text, o.created_at, o.attempts,
  o.next_attempt_at <= clock_timestamp()
FROM ` + t + ` o
WHERE current_setting('` + claimLease + `') = '` + leaseKeyed + `'
  AND ((hashtext(o.aggregateid) & ($2::int4 - 1)) IN (SELECT unnest(current_setting('` + claimBuckets + `')::int4[]))) IS TRUE
  AND ` + claimable(t, d) + `
ORDER BY o.seq LIMIT $1`
	s.markPublished = `UPDATE ` + t + ` SET published_at = clock_timestamp() WHERE seq = ANY($1::bigint[])
RETURNING seq, extract(epoch FROM published_at - created_at)::float8 * 1000`
	s.deletePublished = `DELETE FROM ` + t + ` WHERE seq = ANY($1::bigint[])
RETURNING seq, extract(epoch FROM clock_timestamp() - created_at)::float8 * 1000`
	s.fail = `UPDATE ` + t + ` SET attempts = attempts + 1, last_error = $3,
  next_attempt_at = clock_timestamp() + $2::bigint * interval '1 millisecond' WHERE seq = $1`
	s.park = `WITH m AS (DELETE FROM ` + t + ` WHERE seq = $1 RETURNING *)
INSERT INTO ` + d + ` (id, seq, aggregatetype, aggregateid, type, payload, payload_json, headers, created_at, attempts, last_error)
SELECT id, seq, aggregatetype, aggregateid, type, payload, payload_json, headers, created_at, attempts + 1, $2 FROM m`
	s.oldest = `SELECT coalesce((SELECT extract(epoch FROM clock_timestamp() - created_at)::float8 FROM ` + t + `
  WHERE published_at IS NULL ORDER BY seq LIMIT 1), 0)`
	// A relay's look around, every second: the oldest pending age, and how many
	// relays hold the presence lock of the table ($1: the presence class, $2: the
	// table, whose oid is the key; each relay holds it shared on its LISTEN
	// connection) — one means this relay is alone and may work solo.
	s.relayGauge = `SELECT (` + s.oldest + `), (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND classid = $1::int4::oid AND objid = $2::text::regclass::oid AND objsubid = 2)`
	s.presence = `SELECT pg_advisory_lock_shared($1::int4, $2::text::regclass::oid::int4)`
	s.prune = `DELETE FROM ` + t + ` WHERE seq IN (SELECT seq FROM ` + t + `
  WHERE published_at < clock_timestamp() - $1::bigint * interval '1 millisecond' LIMIT $2 FOR UPDATE SKIP LOCKED)`
	const parkedCols = `id, seq, aggregatetype, aggregateid, type, payload, headers::text, created_at, attempts, coalesce(last_error, ''), parked_at`
	s.parkedOne = `SELECT ` + parkedCols + ` FROM ` + d + ` WHERE id = $1 FOR UPDATE`
	s.parkedKey = `SELECT aggregateid FROM ` + d + ` WHERE id = $1`
	s.requeue = `WITH m AS (DELETE FROM ` + d + ` WHERE id = $1 RETURNING *)
INSERT INTO ` + t + ` (seq, ` + cols + `, created_at)
OVERRIDING SYSTEM VALUE
SELECT seq, ` + cols + `, created_at FROM m`
	s.discard = `DELETE FROM ` + d + ` WHERE id = $1`
	return s
}
