package idempotency

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/pgerr"
	"github.com/coordkit/coordkit/internal/pgschema"
	"github.com/coordkit/coordkit/internal/pgtx"
)

// Key row statuses.
const (
	statusInProgress = 1
	statusCompleted  = 2
)

// Store keeps idempotency keys in one Postgres table. It is safe for concurrent use.
type Store struct {
	pool   *pgxpool.Pool
	cfg    Config
	table  string // quoted, schema-qualified when Config.Schema is set
	in     *instruments
	q      queries
	plan   plan // Do's first round trip: claim or look up
	tracer trace.Tracer
	schema pgschema.Component
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
	// AssumeNew (Do only) always claims the key first, even while most recent
	// requests found their key (then Do looks it up first, without a transaction,
	// so that a replay costs one round trip instead of two). Default false.
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

// Do runs fn at most once for key, in a READ COMMITTED transaction of its own that
// also writes the key row with fn's Response: the key and the effect commit or roll
// back together. A completed key is replayed and fn does not run.
//
// Requests with the same key are serialized on a transaction-scoped advisory lock:
// Do takes it, then reads the key (a snapshot taken after the lock), and runs fn
// only when the key is absent. A new key costs the round trips of the bare effect
// transaction: BEGIN with the claim, fn's statements, the key row with COMMIT. While
// more than half of the recent requests of this Store found their key (a retry
// storm), Do first looks the key up without a transaction instead, so a replay costs
// one round trip (see DoOpts.AssumeNew). fn receives a pgx.Tx on Do's connection:
// savepoints (tx.Begin) work; tx.Commit and tx.Rollback of the transaction itself
// return an error.
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
	if (opts == nil || !opts.AssumeNew) && s.plan.lookupFirst() {
		if r, ok, err := s.lookup(ctx, s.pool, key); err != nil {
			return Result{}, err
		} else if ok {
			s.plan.observe(true)
			return s.classify(ctx, s.pool, key, fp, r)
		}
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("idempotency: acquire: %w", err)
	}
	defer c.Release() // a connection left inside a transaction is destroyed, rolling it back
	conn := c.Conn()
	r, found, err := s.claim(ctx, conn, true, key, s.waitTimeout(opts))
	if err != nil || found {
		pgtx.RollbackConn(ctx, conn)
		if err != nil {
			return Result{}, err
		}
		s.plan.observe(true)
		// On this connection: taking a second one from the pool could deadlock it.
		return s.classify(ctx, conn, key, fp, r)
	}
	s.plan.observe(false)
	resp, err := runFn(ctx, newConnTx(conn), fn)
	if err != nil {
		pgtx.RollbackConn(ctx, conn)
		return Result{}, err
	}
	hdr, err := s.checkSize(&resp)
	if err != nil {
		pgtx.RollbackConn(ctx, conn)
		return Result{}, err
	}
	if err := s.record(ctx, conn, key, fp, resp, hdr); err != nil {
		var found *foundError
		if errors.As(err, &found) {
			return found.res, found.err
		}
		return Result{}, err
	}
	s.in.executions.Add(ctx, 1)
	return Result{Response: resp}, nil
}

// batcher sends a batch: a *pgx.Conn or a pgx.Tx.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// claim takes key's advisory lock in db's transaction — beginning the transaction
// in the same round trip when begin is set — and reads the key with a snapshot
// taken after the lock. found reports a stored row (completed, or a phased request
// in progress), which the caller answers instead of running fn; the lock is then
// not waited for. A duplicate whose transaction holds the lock is waited for at
// most wait (one more round trip), then *InFlightError.
func (s *Store) claim(ctx context.Context, db batcher, begin bool, key Key, wait time.Duration) (r keyRow, found bool, err error) {
	id := s.lockID(key)
	b := &pgx.Batch{}
	if begin {
		b.Queue("begin isolation level read committed")
	}
	b.Queue(s.q.tryLock, id)
	b.Queue(s.q.lookup, key.Scope, key.ID)
	br := db.SendBatch(ctx, b)
	var beginErr error
	if begin {
		_, beginErr = br.Exec()
	}
	var locked bool
	lockErr := br.QueryRow().Scan(&locked)
	found, readErr := scanKey(&r, br.QueryRow())
	if err := firstErr(beginErr, lockErr, readErr, br.Close()); err != nil {
		return keyRow{}, false, fmt.Errorf("idempotency: claim %s: %w", key, err)
	}
	if locked || found {
		return r, found, nil
	}
	// A duplicate holds the lock: wait for its transaction to end, then read again.
	b = &pgx.Batch{}
	b.Queue(s.q.waitLock, id, pgtx.Millis(wait))
	b.Queue(s.q.lookup, key.Scope, key.ID)
	br = db.SendBatch(ctx, b)
	_, lockErr = br.Exec()
	found, readErr = scanKey(&r, br.QueryRow())
	if err := firstErr(lockErr, readErr, br.Close()); err != nil {
		if pgerr.Code(err) == pgerr.LockNotAvailable {
			return keyRow{}, false, s.inFlight(ctx, key, wait, 0)
		}
		return keyRow{}, false, fmt.Errorf("idempotency: claim %s: %w", key, err)
	}
	return r, found, nil
}

// firstErr returns the first non-nil error: after a batch's first failure, pgx
// reports the same error for every later result.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// lockID is the advisory lock of key: 64 bits of a hash of the table's own name
// (without its Schema, so that a Store naming the schema and one reaching the
// table through the search_path take the same lock; same-named tables of two
// schemas merely share lock slots), the scope and the key (length-prefixed, so no
// two keys share an encoding). A collision only makes two keys wait for each other.
func (s *Store) lockID(key Key) int64 {
	h := FingerprintOf([]byte(s.cfg.Table), []byte(key.Scope), []byte(key.ID))
	return int64(binary.BigEndian.Uint64(h[:8]))
}

// DoTx is Do inside the caller's transaction tx: it takes the key's advisory lock
// in tx (waiting at most the WaitTimeout for a duplicate in flight), reads the key,
// runs fn with tx and writes the key row with fn's Response in tx. The caller
// commits tx; the key and the effect then commit or roll back together. A completed
// key is replayed and leaves tx usable. tx must be READ COMMITTED: under REPEATABLE
// READ or SERIALIZABLE a concurrent duplicate surfaces as an error (a serialization
// failure or *InFlightError).
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
	r, found, err := s.claim(ctx, tx, false, key, s.waitTimeout(opts))
	if err != nil {
		return Result{}, err
	}
	if found {
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
	if _, err := tx.Exec(ctx, s.q.insertCompleted, key.Scope, key.ID, fp[:], resp.Status, hdr, resp.Body); err != nil {
		if pgerr.Code(err) == pgerr.UniqueViolation {
			// A writer that does not take the key's lock (Store.Run) committed the
			// key meanwhile; tx is aborted, so the retry learns how it ended.
			return Result{}, errors.Join(s.inFlight(ctx, key, time.Second, 0), err)
		}
		return Result{}, fmt.Errorf("idempotency: store response for %s: %w", key, err)
	}
	s.in.executions.Add(ctx, 1)
	return Result{Response: resp}, nil
}

// Lookup returns the stored response of a completed key (ok true), without running
// anything. It returns ok false for an unknown key, *InFlightError for a phased key
// in progress (Run) and *MismatchError for a different fingerprint. It takes no
// lock: a Do or DoTx of the key that has not committed yet has written no row, so
// Lookup reports that key unknown (ok false) — only Do and DoTx wait for it. It
// blocks for one query.
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

func (s *Store) lookup(ctx context.Context, db DBTX, key Key) (keyRow, bool, error) {
	var r keyRow
	found, err := scanKey(&r, db.QueryRow(ctx, s.q.lookup, key.Scope, key.ID))
	if err != nil {
		return r, false, fmt.Errorf("idempotency: lookup %s: %w", key, err)
	}
	return r, found, nil
}

// scanKey reads a lookup row into r; found is false when there is none.
func scanKey(r *keyRow, row pgx.Row) (found bool, err error) {
	err = r.scan(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// classify turns an existing row into the outcome for a request with fingerprint
// fp; db answers the follow-up query for a key in progress.
func (s *Store) classify(ctx context.Context, db DBTX, key Key, fp Fingerprint, r keyRow) (Result, error) {
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
