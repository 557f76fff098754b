package schedule

// statements are the SQL of one Config's tables, built once.
type statements struct {
	register, load, running, rider, record, recordBatch, misses, pending, requestDone string
}

// identity is the fires table's primary key in parameters $1..$4.
const identity = "tenant = $1 AND job = $2 AND local_time = $3 AND fold = $4"

// assertOne ends a record statement: it divides by the number of rows its
// CTE f wrote, so a record that wrote none (the identity or the batch was
// already recorded: a duplicate) fails with division_by_zero (22012) — an
// error, which aborts the transaction and with it the COMMIT sent in the
// same round trip. A zero-row result would have let that COMMIT through.
const assertOne = "SELECT 1 / (SELECT count(*)::int FROM f)"

func newStatements(t tables) statements {
	return statements{
		// Declares the jobs of one partition: definitions follow the code,
		// state (paused, last_*) stays. New jobs start at $12 (now).
		register: `INSERT INTO ` + t.jobs + ` AS j (tenant, job, cron, every_ms, zone, gap, fold, catch_up, max_catch_up, window_ms, overlap, last_nominal)
			SELECT $1, d.job, d.cron, d.every_ms, d.zone, d.gap, d.fold, d.catch_up, d.max_catch_up, d.window_ms, d.overlap, $12
			FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[], $9::int[], $10::bigint[], $11::text[])
			  AS d(job, cron, every_ms, zone, gap, fold, catch_up, max_catch_up, window_ms, overlap)
			ON CONFLICT (tenant, job) DO UPDATE SET cron = excluded.cron, every_ms = excluded.every_ms, zone = excluded.zone,
			  gap = excluded.gap, fold = excluded.fold, catch_up = excluded.catch_up, max_catch_up = excluded.max_catch_up,
			  window_ms = excluded.window_ms, overlap = excluded.overlap, updated_at = now()
			WHERE (j.cron, j.every_ms, j.zone, j.gap, j.fold, j.catch_up, j.max_catch_up, j.window_ms, j.overlap) IS DISTINCT FROM
			  (excluded.cron, excluded.every_ms, excluded.zone, excluded.gap, excluded.fold, excluded.catch_up, excluded.max_catch_up, excluded.window_ms, excluded.overlap)`,
		load: `SELECT job, paused, last_nominal, last_success_at FROM ` + t.jobs + ` WHERE tenant = $1 AND job = ANY($2)`,
		running: `SELECT job, local_time, fold, nominal, kind, batches, cursor FROM ` + t.fires +
			` WHERE tenant = $1 AND job = ANY($2) AND outcome = 'running' ORDER BY nominal`,
		// Rides with BEGIN and the fence's guard: locks the job's row for the
		// transaction (operators' verbs wait for the fire) and reads the
		// fire's record, if any.
		rider: `SELECT j.paused, j.last_nominal, f.outcome, f.batches FROM ` + t.jobs + ` j
			LEFT JOIN ` + t.fires + ` f ON f.tenant = j.tenant AND f.job = j.job AND f.local_time = $3 AND f.fold = $4
			WHERE j.tenant = $1 AND j.job = $2 FOR UPDATE OF j`,
		// Rides with COMMIT: the fire's record (a backfill may turn a missed
		// record into a run) and the job's progress. $6 kind, $7 outcome,
		// $13 the scheduler's time of the commit, $14 a request carried out.
		record: `WITH f AS (
			  INSERT INTO ` + t.fires + ` AS r (tenant, job, local_time, fold, nominal, kind, outcome, reason, token, batches, cursor, attempts, finished_at)
			  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, CASE WHEN $7 = 'running' THEN NULL ELSE now() END)
			  ON CONFLICT (tenant, job, local_time, fold) DO UPDATE SET kind = excluded.kind, outcome = excluded.outcome,
			    reason = excluded.reason, token = excluded.token, batches = excluded.batches, cursor = excluded.cursor,
			    attempts = excluded.attempts, recorded_at = now(), finished_at = excluded.finished_at
			  WHERE r.outcome = 'missed' AND excluded.kind = 'backfill'
			  RETURNING 1
			), j AS (
			  UPDATE ` + t.jobs + ` SET
			    last_nominal = CASE WHEN $6 = 'scheduled' AND $5 > last_nominal THEN $5 ELSE last_nominal END,
			    last_local = CASE WHEN $6 = 'scheduled' AND $5 > last_nominal THEN $3 ELSE last_local END,
			    last_fold = CASE WHEN $6 = 'scheduled' AND $5 > last_nominal THEN $4 ELSE last_fold END,
			    last_outcome = $7, last_fire_at = $13,
			    last_success_at = CASE WHEN $7 IN ('ok', 'running') THEN $13 ELSE last_success_at END
			  WHERE tenant = $1 AND job = $2 AND EXISTS (SELECT FROM f)
			), q AS (
			  UPDATE ` + t.requests + ` SET done_at = now(), result = $7 WHERE id = $14 AND EXISTS (SELECT FROM f)
			) ` + assertOne,
		// Rides with COMMIT: batch $5 (1, 2, …) of a multi-batch run.
		recordBatch: `WITH f AS (
			  UPDATE ` + t.fires + ` SET batches = $5 + 1, outcome = $6, cursor = $7, token = $8,
			    finished_at = CASE WHEN $6 = 'running' THEN NULL ELSE now() END
			  WHERE ` + identity + ` AND outcome = 'running' AND batches = $5
			  RETURNING 1
			), j AS (
			  UPDATE ` + t.jobs + ` SET last_outcome = $6, last_fire_at = $9,
			    last_success_at = CASE WHEN $6 IN ('ok', 'running') THEN $9 ELSE last_success_at END
			  WHERE tenant = $1 AND job = $2 AND EXISTS (SELECT FROM f)
			) ` + assertOne,
		// Records fires that will not run (missed, with their reasons) and
		// moves the job's last nominal time past them, in a fenced
		// transaction of its own.
		misses: `WITH f AS (
			  INSERT INTO ` + t.fires + ` (tenant, job, local_time, fold, nominal, kind, outcome, reason, token, finished_at)
			  SELECT $1, $2, m.local_time, m.fold, m.nominal, 'scheduled', 'missed', m.reason, $7, now()
			  FROM unnest($3::timestamp[], $4::smallint[], $5::timestamptz[], $6::text[]) AS m(local_time, fold, nominal, reason)
			  ON CONFLICT DO NOTHING
			  RETURNING 1
			)
			UPDATE ` + t.jobs + ` SET last_nominal = $8, last_local = $9, last_fold = $10, last_outcome = 'missed', last_fire_at = $11
			WHERE tenant = $1 AND job = $2 AND last_nominal < $8`,
		pending: `SELECT id, job, kind, at, range_to FROM ` + t.requests +
			` WHERE tenant = $1 AND job = ANY($2) AND done_at IS NULL ORDER BY id LIMIT 100`,
		requestDone: `UPDATE ` + t.requests + ` SET done_at = now(), result = $2 WHERE id = $1 AND done_at IS NULL`,
	}
}
