package idempotency

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/internal/pgerr"
	"github.com/coordkit/coordkit/internal/pgtext"
	"github.com/coordkit/coordkit/internal/pgtx"
)

// RecoveryStarted is the recovery point of a key whose first phase has not committed.
const RecoveryStarted = "started"

// Operation is a request made of atomic phases, for effects that cannot join one
// transaction (a payment provider call). Each phase commits a recovery point with the
// key; a request that crashed is resumed after its last recovery point, by a retry
// once its lock expired (Store.Run) or by a Completer. Operations are values the
// program declares once; the Completer finds them by Name.
type Operation struct {
	// Name identifies the operation in the key row; 1..200 bytes of UTF-8 without
	// NUL, stable across deploys.
	Name string
	// Phases run in order. Names are unique, non-empty, UTF-8 without NUL and not
	// RecoveryStarted. The phase that finishes the request sets State.Response;
	// the rest are skipped.
	Phases []Phase
}

// Phase is one step of an Operation: exactly one of Tx and External is set.
type Phase struct {
	// Name is the recovery point recorded when the phase has committed.
	Name string
	// Tx runs in a transaction that also records the recovery point (and, when it
	// sets st.Response, the completed response): its writes and the recovery point
	// commit together. It must not commit or roll back tx.
	Tx func(ctx context.Context, tx pgx.Tx, st *State) error
	// External runs outside any transaction — a call to another system, which must
	// be idempotent under st.Key.ID (pass the key through). What it learns goes in
	// st.Data, recorded with the recovery point after it returns. If the process
	// dies before that, the phase runs again with the same key.
	External func(ctx context.Context, st *State) error
}

// State is what the phases of one request share.
type State struct {
	Key           Key       // pass Key.ID to external calls as their idempotency key
	Request       []byte    // the request given to Run, stored with the key (read-only)
	Data          []byte    // carried between phases; persisted with every recovery point
	RecoveryPoint string    // the last committed phase, RecoveryStarted at first
	Resumed       bool      // true when this run took over a key abandoned by another run
	Response      *Response // set by the phase that finishes the request
}

func (op *Operation) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOperation}, a...)...)
	}
	// Names are stored as text: pgtext.Clean changes what text cannot store.
	if op == nil || op.Name == "" || pgtext.Clean(op.Name, 200) != op.Name {
		return bad("operation name must be 1..200 bytes of UTF-8 without NUL")
	}
	if len(op.Phases) == 0 {
		return bad("operation %q has no phases", op.Name)
	}
	seen := map[string]bool{RecoveryStarted: true}
	for _, p := range op.Phases {
		if p.Name == "" || seen[p.Name] || pgtext.Clean(p.Name, -1) != p.Name {
			return bad("operation %q: phase name %q empty, reserved, duplicated, not UTF-8 or with a NUL", op.Name, p.Name)
		}
		seen[p.Name] = true
		if (p.Tx == nil) == (p.External == nil) {
			return bad("operation %q: phase %q needs exactly one of Tx and External", op.Name, p.Name)
		}
	}
	return nil
}

// next returns the index of the phase after recovery point rp.
func (op *Operation) next(rp string) (int, error) {
	if rp == RecoveryStarted {
		return 0, nil
	}
	for i, p := range op.Phases {
		if p.Name == rp {
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("%w: operation %q has no phase %q", ErrInvalidOperation, op.Name, rp)
}

// Run executes the phased operation op for key: it claims the key (committing an
// in-progress row with a lock of Config.LockTimeout), then runs the phases after the
// key's recovery point, each committing its recovery point. A completed key replays;
// a different fingerprint is *MismatchError; a key locked by a live run is
// *InFlightError; a key whose lock expired is taken over and resumed (State.Resumed).
//
// It blocks for the phases. ctx cancels them; a cancelled or failed phase releases
// the lock so a retry resumes at once, and returns the phase's error (wrapped). If
// another run took the key over meanwhile, it returns an error matching ErrLockLost.
// request (≤ Config.MaxRequestBytes) is stored so a resumed run sees it.
func (s *Store) Run(ctx context.Context, key Key, fp Fingerprint, op *Operation, request []byte) (res Result, err error) {
	ctx, sp := s.span(ctx, "idempotency.Run", key)
	defer func() { endSpan(sp, res, err) }()
	return s.run(ctx, key, fp, op, request)
}

func (s *Store) run(ctx context.Context, key Key, fp Fingerprint, op *Operation, request []byte) (Result, error) {
	if err := key.Validate(); err != nil {
		return Result{}, err
	}
	if err := op.validate(); err != nil {
		return Result{}, err
	}
	if len(request) > s.cfg.MaxRequestBytes {
		return Result{}, fmt.Errorf("%w: request of %d bytes > MaxRequestBytes %d", ErrInvalidKey, len(request), s.cfg.MaxRequestBytes)
	}
	token := make([]byte, 16)
	_, _ = rand.Read(token)
	st, res, err := s.claimPhased(ctx, key, fp, op, request, token)
	if err != nil || st == nil {
		return res, err
	}
	return s.runPhases(ctx, op, st, token)
}

// claimPhased returns the State to run from, or the outcome for an existing key.
func (s *Store) claimPhased(ctx context.Context, key Key, fp Fingerprint, op *Operation, request, token []byte) (*State, Result, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, Result{}, fmt.Errorf("idempotency: claim %s: %w", key, err)
	}
	defer pgtx.Rollback(ctx, tx)
	wait := s.cfg.WaitTimeout
	lockMS := s.cfg.LockTimeout.Milliseconds()
	b := &pgx.Batch{}
	b.Queue(s.q.setLockTimeout, pgtx.Millis(wait))
	b.Queue(`INSERT INTO `+s.table+` (scope, idem_key, fingerprint, status, operation, request, lock_token, locked_until)
		VALUES ($1, $2, $3, 1, $4, $5, $6, now() + $7::bigint * interval '1 millisecond') ON CONFLICT DO NOTHING`,
		key.Scope, key.ID, fp[:], op.Name, request, token, lockMS)
	b.Queue(`UPDATE `+s.table+` SET lock_token = $4, locked_until = now() + $5::bigint * interval '1 millisecond', updated_at = now()
		WHERE scope = $1 AND idem_key = $2 AND fingerprint = $3 AND status = 1 AND locked_until <= now() AND lock_token <> $4
		RETURNING operation, recovery_point, recovery_data, request`,
		key.Scope, key.ID, fp[:], token, lockMS)
	b.Queue(s.q.restoreLockTimeout)
	b.Queue(s.q.lookup, key.Scope, key.ID)
	br := tx.SendBatch(ctx, b)
	_, err1 := br.Exec()
	tag, err2 := br.Exec()
	var (
		taken            bool
		opName, rp       string
		data, storedReq  []byte
		r                keyRow
		err3, err4, err5 error
	)
	err3 = br.QueryRow().Scan(&opName, &rp, &data, &storedReq)
	if errors.Is(err3, pgx.ErrNoRows) {
		err3 = nil
	} else if err3 == nil {
		taken = true
	}
	_, err4 = br.Exec()
	err5 = r.scan(br.QueryRow())
	if err := errors.Join(err1, err2, err3, err4, err5, br.Close()); err != nil {
		if pgerr.Code(err) == pgerr.LockNotAvailable {
			return nil, Result{}, s.inFlight(ctx, key, wait, 0)
		}
		return nil, Result{}, fmt.Errorf("idempotency: claim %s: %w", key, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, Result{}, fmt.Errorf("idempotency: claim %s: %w", key, err)
	}
	switch {
	case tag.RowsAffected() == 1:
		return &State{Key: key, Request: request, RecoveryPoint: RecoveryStarted}, Result{}, nil
	case taken:
		if opName != op.Name {
			s.release(key, token) // the takeover committed: do not leave the key locked for LockTimeout
			return nil, Result{}, fmt.Errorf("%w: key %s belongs to operation %q", ErrInvalidOperation, key, opName)
		}
		return &State{Key: key, Request: storedReq, Data: data, RecoveryPoint: rp, Resumed: true}, Result{}, nil
	}
	res, err := s.classify(ctx, s.pool, key, fp, r)
	return nil, res, err
}

// runPhases runs op's phases after st.RecoveryPoint while holding the lock token.
func (s *Store) runPhases(ctx context.Context, op *Operation, st *State, token []byte) (Result, error) {
	start, err := op.next(st.RecoveryPoint)
	if err != nil {
		return Result{}, err
	}
	for _, ph := range op.Phases[start:] {
		if err := s.runPhase(ctx, ph, st, token); err != nil {
			if !errors.Is(err, ErrLockLost) {
				s.release(st.Key, token)
			}
			return Result{}, fmt.Errorf("idempotency: %s phase %q: %w", st.Key, ph.Name, err)
		}
		st.RecoveryPoint = ph.Name
		if st.Response != nil {
			s.in.executions.Add(ctx, 1)
			return Result{Response: *st.Response}, nil
		}
	}
	s.release(st.Key, token)
	return Result{}, fmt.Errorf("%w: operation %q finished without a Response", ErrInvalidOperation, op.Name)
}

func (s *Store) runPhase(ctx context.Context, ph Phase, st *State, token []byte) error {
	if ph.External != nil {
		// Fence before the call, not only after it: a run whose lock was taken over
		// (a completer reaching a key late) must not call the other system again.
		if err := s.fence(ctx, s.pool, st, token); err != nil {
			return err
		}
		if err := ph.External(ctx, st); err != nil {
			return err
		}
		return s.advance(ctx, s.pool, ph.Name, st, token)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer pgtx.Rollback(ctx, tx)
	// Fence first: the row lock keeps a takeover out until this phase commits.
	if err := s.fence(ctx, tx, st, token); err != nil {
		return err
	}
	if err := ph.Tx(ctx, tx, st); err != nil {
		return err
	}
	if err := s.advance(ctx, tx, ph.Name, st, token); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// fence renews token's lock on the key for LockTimeout; ErrLockLost if token no
// longer owns it.
func (s *Store) fence(ctx context.Context, db DBTX, st *State, token []byte) error {
	tag, err := db.Exec(ctx, `UPDATE `+s.table+` SET locked_until = now() + $4::bigint * interval '1 millisecond'
		WHERE scope = $1 AND idem_key = $2 AND lock_token = $3 AND status = 1`,
		st.Key.Scope, st.Key.ID, token, s.cfg.LockTimeout.Milliseconds())
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return ErrLockLost
	}
	return nil
}

// advance records recovery point rp (and the response, when set) if token still
// owns the key.
func (s *Store) advance(ctx context.Context, db DBTX, rp string, st *State, token []byte) error {
	var (
		done   = st.Response != nil
		status *int
		hdr    []byte
		body   []byte
	)
	if done {
		var err error
		if hdr, err = s.checkSize(st.Response); err != nil {
			return err
		}
		status, body = &st.Response.Status, st.Response.Body
	}
	tag, err := db.Exec(ctx, `UPDATE `+s.table+` SET recovery_point = $4, recovery_data = $5,
		locked_until = CASE WHEN $6 THEN NULL ELSE now() + $7::bigint * interval '1 millisecond' END,
		status = CASE WHEN $6 THEN 2 ELSE 1 END,
		lock_token = CASE WHEN $6 THEN NULL ELSE lock_token END,
		response_status = $8, response_header = $9, response_body = $10,
		completed_at = CASE WHEN $6 THEN now() END, updated_at = now()
		WHERE scope = $1 AND idem_key = $2 AND lock_token = $3 AND status = 1`,
		st.Key.Scope, st.Key.ID, token, rp, st.Data, done, s.cfg.LockTimeout.Milliseconds(), status, hdr, body)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return ErrLockLost
	}
	return nil
}

// release ends token's lock early so a retry resumes at once. Best effort.
func (s *Store) release(key Key, token []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.pool.Exec(ctx, `UPDATE `+s.table+` SET locked_until = now()
		WHERE scope = $1 AND idem_key = $2 AND lock_token = $3 AND status = 1`, key.Scope, key.ID, token); err != nil {
		s.cfg.Logger.Warn("idempotency: release lock", "key", key.String(), "err", err)
	}
}
