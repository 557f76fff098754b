package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/pgerr"
	"github.com/coordkit/coordkit/internal/pgschema"
	"github.com/coordkit/coordkit/internal/pgtx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"
)

// Key row statuses.
const (
	statusInProgress = 1
	statusCompleted  = 2
)

// Store keeps idempotency keys in one Postgres table. It is safe for concurrent use.
type Store struct {
	pool  *pgxpool.Pool
	cfg   Config
	table string // quoted, schema-qualified when Config.Schema is set
	in    *instruments
	q     queries
	// claimName names Do's prepared claim statement, per table.
	claimName string
	tracer    trace.Tracer
	schema    pgschema.Component
}

// Func is the effect of a request. It runs at most once per key that commits: in the
// transaction tx that also holds the key row, and it must neither commit nor roll
// back tx. Its Response is stored and replayed to later requests with the same key.
// Returning an error rolls the effect and the key back (Do) or asks the caller to
// (DoTx), so a retry runs the effect again.
type Func func(ctx context.Context, tx pgx.Tx) (Response, error)

// DoOpts are per-call options; nil means the Config defaults.
type DoOpts struct {
	// WaitTimeout overrides Config.WaitTimeout for this call.
	WaitTimeout time.Duration
	// AssumeNew (Do only) skips the lookup that answers a completed key without
	// opening a transaction: a new key then costs the same round trips as the bare
	// effect transaction plus one, but a replay costs three round trips instead of
	// one. For callers whose retries are rare. Default false.
	AssumeNew bool
}

// New returns a Store on pool. It does not touch the database (see Migrate). It
// returns an error matching ErrInvalidConfig for a bad Config.
func New(pool *pgxpool.Pool, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	in, err := newInstruments(cfg.MeterProvider)
	if err != nil {
		return nil, fmt.Errorf("idempotency: metrics: %w", err)
	}
	schema, err := component(cfg)
	if err != nil {
		return nil, err
	}
	s := &Store{pool: pool, cfg: cfg, table: pgschema.Qualified(cfg.Schema, cfg.Table), in: in, schema: schema}
	s.q = newQueries(s.table)
	s.tracer = cfg.TracerProvider.Tracer(coord.InstrumentationName + "/idempotency")
	s.claimName = "coordkit_idem_claim_" + FingerprintOf([]byte(s.table)).String()[:16]
	return s, nil
}

// Config returns the Store's configuration with defaults applied.
func (s *Store) Config() Config { return s.cfg }

// Table returns the quoted table name, for callers that join against it.
func (s *Store) Table() string { return s.table }

func (s *Store) waitTimeout(o *DoOpts) time.Duration {
	if o != nil && o.WaitTimeout > 0 {
		return o.WaitTimeout
	}
	return s.cfg.WaitTimeout
}

// Do runs fn at most once for key: it looks the key up (a completed key is replayed
// without a transaction), otherwise opens a READ COMMITTED transaction, inserts the
// key row, runs fn in that transaction, stores fn's Response and commits — the key
// and the effect commit or roll back together.
//
// It blocks for the database round trips and for fn; while a duplicate with the same
// key is uncommitted it waits at most the WaitTimeout, then returns *InFlightError.
// ctx cancels every database call (fn gets ctx too). It returns *MismatchError when
// the key was used with another fingerprint, *KeyError for an invalid key,
// fn's error (wrapped) with everything rolled back, and an error matching
// ErrCommitUnknown when the connection broke while COMMIT was in flight — retry with
// the same key: the retry replays or executes, never both.
func (s *Store) Do(ctx context.Context, key Key, fp Fingerprint, fn Func, opts *DoOpts) (res Result, err error) {
	ctx, sp := s.span(ctx, "idempotency.Do", key)
	defer func() { endSpan(sp, res, err) }()
	return s.do(ctx, key, fp, fn, opts)
}

func (s *Store) do(ctx context.Context, key Key, fp Fingerprint, fn Func, opts *DoOpts) (Result, error) {
	if err := key.Validate(); err != nil {
		return Result{}, err
	}
	if opts == nil || !opts.AssumeNew {
		if r, ok, err := s.lookup(ctx, s.pool, key); err != nil {
			return Result{}, err
		} else if ok {
			return s.classify(ctx, s.pool, key, fp, r)
		}
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("idempotency: acquire: %w", err)
	}
	defer c.Release() // a connection left inside a transaction is destroyed, rolling it back
	wait := s.waitTimeout(opts)
	tx, err := s.beginClaim(ctx, c.Conn(), key, fp, wait)
	if err != nil {
		pgtx.RollbackConn(ctx, c.Conn())
		switch pgerr.Code(err) {
		case pgerr.LockNotAvailable:
			return Result{}, s.inFlight(ctx, key, wait, 0)
		case pgerr.UniqueViolation: // a duplicate committed between our lookup and our insert
			// On this connection: taking a second one from the pool could deadlock it.
			r, ok, lerr := s.lookup(ctx, c.Conn(), key)
			if lerr != nil {
				return Result{}, lerr
			}
			if ok {
				return s.classify(ctx, c.Conn(), key, fp, r)
			}
			return Result{}, s.inFlight(ctx, key, wait, 0)
		}
		return Result{}, fmt.Errorf("idempotency: claim %s: %w", key, err)
	}
	resp, err := runFn(ctx, tx, fn)
	if err != nil {
		pgtx.RollbackConn(ctx, c.Conn())
		return Result{}, err
	}
	hdr, err := s.checkSize(&resp)
	if err != nil {
		pgtx.RollbackConn(ctx, c.Conn())
		return Result{}, err
	}
	b := &pgx.Batch{}
	b.Queue(s.q.complete, key.Scope, key.ID, resp.Status, hdr, resp.Body)
	b.Queue("commit")
	br := tx.SendBatch(ctx, b)
	_, uerr := br.Exec()
	_, cerr := br.Exec()
	berr := br.Close()
	if err := errors.Join(uerr, cerr, berr); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) || c.Conn().PgConn().TxStatus() == 'E' {
			pgtx.RollbackConn(ctx, c.Conn())
			return Result{}, fmt.Errorf("idempotency: store response for %s: %w", key, err)
		}
		// The connection failed with COMMIT possibly delivered: the outcome is unknown.
		return Result{}, fmt.Errorf("%w: %s: %w", ErrCommitUnknown, key, err)
	}
	s.in.executions.Add(ctx, 1)
	return Result{Response: resp}, nil
}

// beginClaim opens Do's transaction and claims key in one round trip, preparing
// the claim statement on first use of the connection (pgx remembers it per
// connection, so later calls cost nothing), and re-preparing it once if someone
// deallocated it.
func (s *Store) beginClaim(ctx context.Context, c *pgx.Conn, key Key, fp Fingerprint, wait time.Duration) (pgx.Tx, error) {
	for attempt := 0; ; attempt++ {
		if _, err := c.Prepare(ctx, s.claimName, s.q.claimStmt()); err != nil {
			return nil, err
		}
		tx, err := c.BeginTx(ctx, pgx.TxOptions{BeginQuery: s.q.beginClaim(s.claimName, key, fp, wait, s.cfg.LockTimeout)})
		if err == nil || attempt > 0 || pgerr.Code(err) != pgerr.InvalidStatementName {
			return tx, err
		}
		pgtx.RollbackConn(ctx, c)
		_ = c.Deallocate(ctx, s.claimName)
	}
}

// DoTx is Do inside the caller's transaction tx: it inserts the key row in tx (waiting
// at most the WaitTimeout for an uncommitted duplicate), runs fn with tx and stores
// fn's Response in tx. The caller commits tx; the key and the effect then commit or
// roll back together. tx must be READ COMMITTED: under REPEATABLE READ or
// SERIALIZABLE a concurrent duplicate surfaces as a serialization failure.
//
// After any error the caller must roll tx back (after an *InFlightError from a lock
// wait, tx is already aborted). Errors: *MismatchError, *InFlightError, *KeyError,
// ErrResponseTooLarge, fn's error (wrapped), database errors (wrapped). ctx cancels
// the database calls.
func (s *Store) DoTx(ctx context.Context, tx pgx.Tx, key Key, fp Fingerprint, fn Func, opts *DoOpts) (res Result, err error) {
	ctx, sp := s.span(ctx, "idempotency.DoTx", key)
	defer func() { endSpan(sp, res, err) }()
	return s.doTx(ctx, tx, key, fp, fn, opts)
}

func (s *Store) doTx(ctx context.Context, tx pgx.Tx, key Key, fp Fingerprint, fn Func, opts *DoOpts) (Result, error) {
	if err := key.Validate(); err != nil {
		return Result{}, err
	}
	wait := s.waitTimeout(opts)
	b := &pgx.Batch{}
	b.Queue(s.q.insertClaim, key.Scope, key.ID, fp[:], s.cfg.LockTimeout.Milliseconds(), fmt.Sprintf("%dms", wait.Milliseconds()))
	b.Queue(s.q.restoreLockTimeout)
	b.Queue(s.q.lookup, key.Scope, key.ID)
	br := tx.SendBatch(ctx, b)
	tag, err2 := br.Exec()
	_, err3 := br.Exec()
	var r keyRow
	err4 := r.scan(br.QueryRow())
	err5 := br.Close()
	if err := errors.Join(err2, err3); err != nil {
		if pgerr.Code(err) == pgerr.LockNotAvailable {
			return Result{}, s.inFlight(ctx, key, wait, 0)
		}
		return Result{}, fmt.Errorf("idempotency: claim %s: %w", key, err)
	}
	if err := errors.Join(err4, err5); err != nil {
		return Result{}, fmt.Errorf("idempotency: claim %s: %w", key, err)
	}
	if tag.RowsAffected() == 0 {
		return s.classify(ctx, tx, key, fp, r)
	}
	resp, err := runFn(ctx, tx, fn)
	if err != nil {
		return Result{}, err
	}
	hdr, err := s.checkSize(&resp)
	if err != nil {
		return Result{}, err
	}
	if _, err := tx.Exec(ctx, s.q.complete, key.Scope, key.ID, resp.Status, hdr, resp.Body); err != nil {
		return Result{}, fmt.Errorf("idempotency: store response for %s: %w", key, err)
	}
	s.in.executions.Add(ctx, 1)
	return Result{Response: resp}, nil
}

// Lookup returns the stored response of a completed key (ok true), without running
// anything. It returns ok false for an unknown key, *InFlightError for a key in
// progress and *MismatchError for a different fingerprint. It blocks for one query.
func (s *Store) Lookup(ctx context.Context, key Key, fp Fingerprint) (Result, bool, error) {
	if err := key.Validate(); err != nil {
		return Result{}, false, err
	}
	r, ok, err := s.lookup(ctx, s.pool, key)
	if err != nil || !ok {
		return Result{}, false, err
	}
	res, err := s.classify(ctx, s.pool, key, fp, r)
	return res, err == nil, err
}

func runFn(ctx context.Context, tx pgx.Tx, fn Func) (resp Response, err error) {
	resp, err = fn(ctx, tx)
	if err != nil {
		return Response{}, fmt.Errorf("idempotency: effect: %w", err)
	}
	return resp, nil
}

// keyRow is a stored key as lookup reads it.
type keyRow struct {
	fingerprint []byte
	status      int16
	respStatus  *int32
	respHeader  []byte
	respBody    []byte
}

func (r *keyRow) scan(row pgx.Row) error {
	return row.Scan(&r.fingerprint, &r.status, &r.respStatus, &r.respHeader, &r.respBody)
}

func (s *Store) lookup(ctx context.Context, db Querier, key Key) (keyRow, bool, error) {
	var r keyRow
	err := r.scan(db.QueryRow(ctx, s.q.lookup, key.Scope, key.ID))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("idempotency: lookup %s: %w", key, err)
	}
	return r, true, nil
}

// classify turns an existing row into the outcome for a request with fingerprint
// fp; db answers the follow-up query for a key in progress.
func (s *Store) classify(ctx context.Context, db Querier, key Key, fp Fingerprint, r keyRow) (Result, error) {
	if !bytes.Equal(r.fingerprint, fp[:]) {
		s.in.mismatches.Add(ctx, 1)
		return Result{}, &MismatchError{Key: key}
	}
	if r.status != statusCompleted {
		var lockedMS, ageMS int64
		if err := db.QueryRow(ctx, s.q.inFlight, key.Scope, key.ID).Scan(&lockedMS, &ageMS); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return Result{}, fmt.Errorf("idempotency: lookup %s: %w", key, err)
		}
		return Result{}, s.inFlight(ctx, key, time.Duration(lockedMS)*time.Millisecond, time.Duration(ageMS)*time.Millisecond)
	}
	h, err := decodeHeader(r.respHeader)
	if err != nil {
		return Result{}, err
	}
	resp := Response{Header: h, Body: r.respBody}
	if r.respStatus != nil {
		resp.Status = int(*r.respStatus)
	}
	if resp.Body == nil {
		resp.Body = []byte{}
	}
	s.in.replays.Add(ctx, 1)
	return Result{Response: resp, Replayed: true}, nil
}

func (s *Store) inFlight(ctx context.Context, key Key, retry, age time.Duration) error {
	if retry < time.Second {
		retry = time.Second
	}
	retry = retry.Round(time.Second)
	s.in.conflict(ctx, age, "in_flight")
	return &InFlightError{Key: key, RetryAfter: retry, Age: age}
}
