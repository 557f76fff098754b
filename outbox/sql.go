package outbox

// statements holds the SQL of an Outbox, built once with quoted table names.
type statements struct {
	insert, insertNotify           string
	insertBatch, insertBatchNotify string
	soloLease, keyedLease          string
	soloClaim                      string
	lockKeys, claim                string
	markPublished, deletePublished string
	fail, park                     string
	oldest, prune                  string
	relayGauge, presence           string
	parkedOne, parkedKey           string
	requeue, discard               string
}

// The transaction-local settings by which the locking scan hands the claim its
// keys and seq range, and the relay lease its batch holds (leaseSolo, leaseKeyed,
// or ” when another relay's batch held it).
const (
	claimKeys  = "coordkit.outbox_claim_keys"
	claimMin   = "coordkit.outbox_claim_min"
	claimMax   = "coordkit.outbox_claim_max"
	claimLease = "coordkit.outbox_lease"
)

// batchSettings, first in a relay's transaction with the lease: custom plans
// always (a cached generic plan of the claim statements, which cannot see the
// batch size and the seq bound, can read every pending row), and a commit that
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
	s.keyedLease = leaseStatement("pg_try_advisory_xact_lock_shared", leaseKeyed)
	// The solo claim (the lease held exclusively, so no other relay holds a key):
	// the pending rows in seq order, past the keys that are parked or whose head
	// waits for a retry; the LIMIT cuts the tail, so every key's rows are a prefix
	// from its head. Nothing without the lease (a one-time filter).
	s.soloClaim = `SELECT o.seq, o.id, o.aggregatetype, o.aggregateid, o.type, o.payload, o.headers::text, o.created_at, o.attempts,
  o.next_attempt_at <= clock_timestamp()
FROM ` + t + ` o
WHERE current_setting('` + claimLease + `') = '` + leaseSolo + `'
  AND o.published_at IS NULL
  AND o.aggregateid NOT IN (SELECT d.aggregateid FROM ` + d + ` d)
  AND o.aggregateid NOT IN (SELECT r.aggregateid FROM ` + t + ` r WHERE r.published_at IS NULL AND r.attempts > 0
                            AND r.next_attempt_at > clock_timestamp())
ORDER BY o.seq LIMIT $1`

	// Keyed: scan pending rows in seq order, skipping keys that are parked or whose head
	// waits for a retry (NOT IN over small sets: hashed once per statement), and
	// try-lock each row's key: a key already driven by another relay fails the
	// try-lock and is skipped; the scan stops after $1 + 1 rows (of keys this relay
	// now holds, and the window's first row whatever its key), or after $3 pending rows
	// (a window, so that a relay finding every key taken walks a bounded stretch
	// instead of the whole backlog, try-locking each row). It hands the claim,
	// through transaction-local settings (so both statements go in one round trip),
	// the locked keys, the highest seq of theirs it reached and the window's first
	// seq (the head of the pending rows it could claim); it returns how many rows
	// of locked keys it reached, and how many rows in all: one or more with none
	// locked means every key it met was taken (the relay retries shortly). Nothing
	// without the lease (a one-time filter).
	s.lockKeys = `SELECT set_config('` + claimKeys + `', coalesce(array_agg(o.aggregateid) FILTER (WHERE o.locked)::text, '{}'), true) IS NULL,
  set_config('` + claimMax + `', coalesce(max(o.seq) FILTER (WHERE o.locked), 0)::text, true) IS NULL,
  set_config('` + claimMin + `', coalesce(min(o.head), 0)::text, true) IS NULL,
  count(*) FILTER (WHERE o.locked), count(*) FROM (
  SELECT w.aggregateid, w.seq, w.head, l.locked FROM (
    SELECT o.aggregateid, o.seq, first_value(o.seq) OVER (ORDER BY o.seq) AS head FROM ` + t + ` o
    WHERE current_setting('` + claimLease + `') = '` + leaseKeyed + `'
      AND o.published_at IS NULL
      AND o.aggregateid NOT IN (SELECT d.aggregateid FROM ` + d + ` d)
      AND o.aggregateid NOT IN (SELECT r.aggregateid FROM ` + t + ` r WHERE r.published_at IS NULL AND r.attempts > 0
                                AND r.next_attempt_at > clock_timestamp())
    ORDER BY o.seq LIMIT $3) w,
    LATERAL (SELECT pg_try_advisory_xact_lock($2::int4, hashtext(w.aggregateid)) AS locked) l
  WHERE l.locked OR w.seq = w.head
  ORDER BY w.seq LIMIT $1 + 1) o`
	// With the key locks held, a fresh snapshot (the next statement): the pending
	// rows of the keys the scan locked (only those: rows of keys held elsewhere or
	// waiting for a retry must not fill the LIMIT and starve this relay), in seq
	// order, between the window's first seq and the highest seq the scan reached.
	// Per key that is a prefix from the true head — including rows the scan
	// skipped while another relay still held the key — because a locked key has
	// no pending row below the window's first seq: it had a row in the window, so
	// it was neither parked nor retrying in the scan's snapshot; every row of it
	// committed since has a higher seq (enqueue serialises per key) and a requeued
	// row comes back only to a parked key. The lower bound is what keeps this
	// second read off the dead index entries of published rows at the head (the
	// scan walks them once). The keys are a hashed subplan filter on the walk of
	// the pending index ("IS TRUE" keeps PostgreSQL from turning it into a
	// semi-join, which it may plan as a walk of the primary key through every
	// published row in range); a text[] parameter would be a constant of BatchSize
	// elements planned every batch. The LIMIT (a multiple of the batch) bounds the
	// read when rows of the locked keys were committed since the scan; cutting the
	// tail keeps every key's rows a prefix, so it is safe. Authoritative: it sees
	// every mark, failure and parking committed by a previous holder of a key.
	s.claim = `SELECT o.seq, o.id, o.aggregatetype, o.aggregateid, o.type, o.payload, o.headers::text, o.created_at, o.attempts,
  o.next_attempt_at <= clock_timestamp()
FROM ` + t + ` o
WHERE o.published_at IS NULL
  AND o.seq >= current_setting('` + claimMin + `')::bigint AND o.seq <= current_setting('` + claimMax + `')::bigint
  AND (o.aggregateid IN (SELECT unnest(current_setting('` + claimKeys + `')::text[]))) IS TRUE
  AND o.aggregateid NOT IN (SELECT d.aggregateid FROM ` + d + ` d)
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
