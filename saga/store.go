package saga

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/internal/pgschema"
	"github.com/coordkit/coordkit/internal/pgtext"
)

// State is a saga's state.
type State string

// The states of a saga. Completed and compensated are terminal; needs_human waits
// for [Client.Resolve].
const (
	StateRunning      State = "running"      // moving forward (before or after the pivot)
	StateCompensating State = "compensating" // undoing completed steps, newest first
	StateCompleted    State = "completed"    // every step succeeded (terminal)
	StateCompensated  State = "compensated"  // every completed step undone (terminal)
	StateNeedsHuman   State = "needs_human"  // a compensation failed CompensationAttempts times; see Client.Resolve
)

// Terminal reports whether s is completed or compensated.
func (s State) Terminal() bool { return s == StateCompleted || s == StateCompensated }

func (s State) valid() bool {
	switch s {
	case StateRunning, StateCompensating, StateCompleted, StateCompensated, StateNeedsHuman:
		return true
	}
	return false
}

// queries holds the SQL of one table, rendered once with the quoted name.
type queries struct {
	channel, listen           string
	insert, claim, transition string
	existing, release         string
	get, lockRow, age         string
	retryNow, cancel          string
	transitionAndClaim        string
}

const infoCols = `id, saga_type, state, step, pivot_step, step_count, attempts, next_attempt_at,
	coalesce(last_error, ''), coalesce(failure, ''), data, outputs, created_at, updated_at, state_since, pivot_at, claim_owner, claim_version, errors, step_names`

func newQueries(schema, table string) queries {
	t := pgschema.Qualified(schema, table)
	r := func(s string) string { return strings.ReplaceAll(s, "$T", t) }
	q := queries{channel: table + dueChannel.Suffix}
	q.listen = "LISTEN " + pgschema.Quoted(q.channel)
	q.insert = r(`WITH ins AS (
		INSERT INTO $T (id, saga_type, state, step, pivot_step, step_count, data, next_attempt_at, step_names)
		VALUES ($1, $2, 'running', 0, $3, $4, $5, now() + make_interval(secs => $6), $8)
		ON CONFLICT (id) DO NOTHING RETURNING id)
	SELECT ins.id FROM ins CROSS JOIN LATERAL (SELECT pg_notify($7, ins.id)) n`)
	q.existing = r(`SELECT saga_type FROM $T WHERE id = $1`)
	q.claim = r(`WITH due AS (
		SELECT id FROM $T
		WHERE state IN ('running', 'compensating') AND saga_type = ANY($1)
		  AND next_attempt_at <= now() AND (claim_until IS NULL OR claim_until < now())
		ORDER BY next_attempt_at LIMIT $2
		FOR UPDATE SKIP LOCKED)
	UPDATE $T s SET claim_owner = $3, claim_until = now() + make_interval(secs => $4),
		claim_version = s.claim_version + 1
	FROM due WHERE s.id = due.id
	RETURNING s.id, s.saga_type, s.state, s.step, s.attempts, s.data, s.outputs, s.claim_version`)
	// transition is the one fenced state write: every change a runner makes goes
	// through it, and it matches no row unless the runner still holds the claim.
	q.transition = r(`UPDATE $T SET
		state = $3, step = $4,
		data = coalesce($5::jsonb, data),
		outputs = CASE WHEN $6::text IS NULL THEN outputs ELSE outputs || jsonb_build_object($6::text, $7::jsonb) END,
		attempts = $8,
		next_attempt_at = CASE WHEN $16::bool THEN now() + make_interval(secs => $9) ELSE next_attempt_at END,
		last_error = coalesce($10::text, last_error),
		errors = CASE WHEN $10::text IS NULL THEN errors ELSE
			(CASE WHEN jsonb_array_length(errors) >= 20 THEN errors - 0 ELSE errors END)
			|| jsonb_build_array(jsonb_build_object('at', now(), 'step', $11::text, 'error', $10::text)) END,
		failure = coalesce($12::text, failure),
		pivot_at = CASE WHEN $13::bool THEN now() ELSE pivot_at END,
		paged_at = CASE WHEN $14::bool OR ($15::float8 IS NOT NULL AND paged_at IS NULL AND pivot_at IS NOT NULL
			AND pivot_at < now() - make_interval(secs => $15::float8)) THEN now() ELSE paged_at END,
		state_since = CASE WHEN state = $3 THEN state_since ELSE now() END,
		finished_at = CASE WHEN $3 IN ('completed', 'compensated') THEN now() ELSE NULL END,
		claim_owner = CASE WHEN $16::bool THEN NULL ELSE claim_owner END,
		claim_until = CASE WHEN $16::bool THEN NULL ELSE now() + make_interval(secs => $17) END,
		updated_at = now()
	WHERE id = $1 AND claim_version = $2
	RETURNING paged_at IS NOT NULL AND paged_at = now()`)
	// transitionAndClaim is transition plus, in the same commit, the claim of the
	// next due saga: a runner that finishes a saga picks up the next one without a
	// commit of its own, so in steady state a step costs one commit.
	body := q.transition[len("UPDATE "+t+" SET"):strings.Index(q.transition, "WHERE id = $1")]
	q.transitionAndClaim = r(`WITH w AS (
		UPDATE $T SET` + body + `WHERE id = $1 AND claim_version = $2
		RETURNING paged_at IS NOT NULL AND paged_at = now() AS paged),
	due AS (
		SELECT id FROM $T
		WHERE state IN ('running', 'compensating') AND saga_type = ANY($18) AND id <> $1
		  AND next_attempt_at <= now() AND (claim_until IS NULL OR claim_until < now())
		ORDER BY next_attempt_at LIMIT 1
		FOR UPDATE SKIP LOCKED),
	c AS (
		UPDATE $T s SET claim_owner = $19, claim_until = now() + make_interval(secs => $17),
			claim_version = s.claim_version + 1
		FROM due WHERE s.id = due.id AND EXISTS (SELECT 1 FROM w)
		RETURNING s.id, s.saga_type, s.state, s.step, s.attempts, s.data, s.outputs, s.claim_version)
	SELECT w.paged, c.id, c.saga_type, c.state, c.step, c.attempts, c.data, c.outputs, c.claim_version
	FROM w LEFT JOIN c ON true`)
	q.release = r(`UPDATE $T SET claim_owner = NULL, claim_until = NULL WHERE id = $1 AND claim_version = $2`)
	q.get = r(`SELECT ` + infoCols + ` FROM $T WHERE id = $1`)
	q.lockRow = r(`SELECT state, step, pivot_step, attempts, claim_owner IS NOT NULL, claim_version FROM $T WHERE id = $1 FOR UPDATE`)
	q.age = r(`SELECT saga_type, state, extract(epoch FROM now() - min(state_since))::float8
		FROM $T WHERE state IN ('running', 'compensating', 'needs_human') GROUP BY saga_type, state`)
	q.retryNow = r(`WITH u AS (UPDATE $T SET next_attempt_at = now(), updated_at = now()
		WHERE id = $1 AND state IN ('running', 'compensating') RETURNING id)
	SELECT u.id FROM u CROSS JOIN LATERAL (SELECT pg_notify($2, u.id)) n`)
	q.cancel = r(`UPDATE $T SET state = $2, step = $3, attempts = 0, next_attempt_at = now(),
		failure = $4, last_error = $4,
		errors = (CASE WHEN jsonb_array_length(errors) >= 20 THEN errors - 0 ELSE errors END)
			|| jsonb_build_array(jsonb_build_object('at', now(), 'step', '', 'error', $4::text)),
		claim_owner = NULL, claim_until = NULL, claim_version = claim_version + 1,
		state_since = now(), updated_at = now(), paged_at = NULL,
		finished_at = CASE WHEN $2 IN ('completed', 'compensated') THEN now() ELSE NULL END
	WHERE id = $1`)
	return q
}

// claimed is a saga a runner holds.
type claimed struct {
	id, typ  string
	state    State
	step     int
	attempts int
	data     []byte
	outputs  map[string]json.RawMessage
	version  int64
}

func secs(d time.Duration) float64 { return d.Seconds() }

func (c *Client) claim(ctx context.Context, types []string, n int) ([]*claimed, error) {
	rows, err := c.pool.Query(ctx, c.q.claim, types, n, c.cfg.Owner, secs(c.cfg.ClaimTTL))
	if err != nil {
		return nil, fmt.Errorf("saga: claim: %w", err)
	}
	var out []*claimed
	for rows.Next() {
		s := &claimed{}
		var state string
		if err := rows.Scan(&s.id, &s.typ, &state, &s.step, &s.attempts, &s.data, &s.outputs, &s.version); err != nil {
			rows.Close()
			return nil, fmt.Errorf("saga: claim: %w", err)
		}
		s.state = State(state)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("saga: claim: %w", err)
	}
	if len(out) > 0 {
		c.stats.commits.Add(1)
	}
	return out, nil
}

// transition is one fenced state change.
type transition struct {
	state      State
	step       int
	data       []byte // nil keeps
	outKey     *string
	outValue   []byte
	attempts   int
	delay      time.Duration
	err        error  // recorded in last_error/errors when non-nil
	errStep    string // step the error belongs to
	failure    *string
	pivot      bool           // the pivot just committed
	page       bool           // paging now (compensation failed)
	stuckAfter *time.Duration // page if past the pivot for longer
	release    bool           // drop the claim
	// chain, with release, claims the next due saga of these types in the same
	// commit; write returns it.
	chain []string
}

// written is what a successful write reports.
type written struct {
	paged bool     // the write newly paged
	next  *claimed // the saga claimed in the same commit (chain), or nil
}

// write applies t if s's claim still holds. It returns ErrClaimLost when another
// runner claimed the saga since.
func (c *Client) write(ctx context.Context, s *claimed, t transition) (written, error) {
	var errText *string
	if t.err != nil {
		e := pgtext.Clean(t.err.Error(), 4000)
		errText = &e
	}
	var stuck *float64
	if t.stuckAfter != nil {
		v := secs(*t.stuckAfter)
		stuck = &v
	}
	args := []any{s.id, s.version,
		string(t.state), t.step, t.data, t.outKey, t.outValue, t.attempts, secs(t.delay),
		errText, t.errStep, t.failure, t.pivot, t.page, stuck, t.release, secs(c.cfg.ClaimTTL)}
	var w written
	var err error
	if t.chain != nil && t.release {
		args = append(args, t.chain, c.cfg.Owner)
		var id, typ, state *string
		var step, attempts *int
		var version *int64
		n := &claimed{}
		err = c.pool.QueryRow(ctx, c.q.transitionAndClaim, args...).Scan(&w.paged,
			&id, &typ, &state, &step, &attempts, &n.data, &n.outputs, &version)
		if err == nil && id != nil && step != nil && attempts != nil && version != nil {
			n.id, n.typ, n.state, n.step, n.attempts, n.version = *id, *typ, State(*state), *step, *attempts, *version
			w.next = n
			c.stats.claims.Add(1)
		}
	} else {
		err = c.pool.QueryRow(ctx, c.q.transition, args...).Scan(&w.paged)
	}
	if err == nil || err == pgx.ErrNoRows {
		c.stats.commits.Add(1)
	}
	if err == pgx.ErrNoRows {
		c.stats.fenced.Add(1)
		return written{}, fmt.Errorf("%w: saga %s claim_version %d", ErrClaimLost, s.id, s.version)
	}
	if err != nil {
		return written{}, fmt.Errorf("saga: write state of %s: %w", s.id, err)
	}
	return w, nil
}
