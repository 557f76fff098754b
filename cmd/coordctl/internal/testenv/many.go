package testenv

import (
	"fmt"
	"testing"
)

// ParkMany parks n events of key (its events numbered 0..n-1), as the relay
// parks poison events, each with the error errText: straight into the
// dead-letter table in one statement, their seqs taken from the outbox's own
// sequence (so that a requeue puts them back in order). It is how the bulk
// tests and the 100,000-row benchmark get their load in seconds.
func (e *Env) ParkMany(t testing.TB, n int, key, errText string) {
	t.Helper()
	_, err := e.DB.Pool.Exec(Ctx(t), `INSERT INTO coord_outbox_parked (id, seq, aggregatetype, aggregateid, type, payload, payload_json, headers, created_at, attempts, last_error)
SELECT gen_random_uuid(), nextval(pg_get_serial_sequence('coord_outbox', 'seq')), 'orders', $2, 'order.invoice_attached',
  '{"order":"' || $2 || '","n":' || i || ',"note":"' || repeat('x', 200) || '"}', true, '{}', clock_timestamp(), 10, $3
FROM generate_series(1, $1) i`, n, key, errText)
	if err != nil {
		t.Fatalf("testenv: park %d events of %s: %v", n, key, err)
	}
}

// StartMany inserts n sagas of type typ in state, their ids prefix-0…,
// state_since spread over the last n seconds, straight into the saga table (the
// shape Start writes), for the paging tests and the benchmark.
func (e *Env) StartMany(t testing.TB, n int, prefix, typ, state, lastError string) {
	t.Helper()
	step, pivot := 1, 2
	if state == "compensating" || state == "needs_human" {
		step = 0
	}
	_, err := e.DB.Pool.Exec(Ctx(t), `INSERT INTO coord_sagas (id, saga_type, state, step, pivot_step, step_count, data, attempts, next_attempt_at,
  last_error, errors, created_at, updated_at, state_since, step_names)
SELECT $2 || '-' || lpad(i::text, 7, '0'), $3, $4, $6, $7, 4, '{"order":"x","cents":100}', 1, now() + interval '1 hour',
  nullif($5, ''), '[]', now() - i * interval '1 second', now() - i * interval '1 second', now() - i * interval '1 second',
  ARRAY['reserve-stock', 'charge-card', 'ship', 'email-receipt']
FROM generate_series(1, $1) i`, n, prefix, typ, state, lastError, step, pivot)
	if err != nil {
		t.Fatalf("testenv: insert %d sagas: %v", n, fmt.Errorf("%w", err))
	}
}
