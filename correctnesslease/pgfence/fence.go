package pgfence

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/labelcap"
	"github.com/coordkit/coordkit/internal/pgerr"
	"github.com/coordkit/coordkit/internal/pgschema"
	"github.com/coordkit/coordkit/internal/pgtx"
)

// DBTX runs statements: a *pgxpool.Pool, *pgx.Conn or pgx.Tx (sqlc's name: Exec,
// Query, QueryRow). Single statements and reads take one.
type DBTX = pgtx.DBTX

// Beginner starts a transaction: a *pgxpool.Pool, *pgx.Conn or pgx.Tx (a
// savepoint). A call that runs its own transaction takes one.
type Beginner = pgtx.Beginner

// Fence checks fencing tokens against a fence table. It is safe for concurrent use
// and holds no connection of its own.
type Fence struct {
	table       string // quoted
	audit       string // quoted audit table (ResetFence)
	guardSQL    string // $1 lease, $2 revision, then settings
	settings    []any  // the timeouts guardSQL sets
	restores    bool   // guardSQL also returns the restored lock_timeout
	readSQL     string
	lockTimeout time.Duration // < 0: none
	idleTimeout time.Duration // < 0: none
	rejected    metric.Int64Counter
	leases      *labelcap.Set // bounds the coordkit.lease values of rejected
	logger      *slog.Logger
	schema      pgschema.Component
}

// New validates cfg (see Config for defaults) and returns a Fence. It does not touch
// the database; call Migrate (or apply MigrationSQL with your own tool) first. An
// invalid field is a *ConfigError (ErrInvalidConfig); for an invalid table or
// schema name it wraps a *coord.NameError (coord.ErrInvalidName).
func New(cfg Config) (*Fence, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rejected, err := newRejected(cfg)
	if err != nil {
		return nil, err
	}
	schema, err := component(cfg.Schema, cfg.Table)
	if err != nil {
		return nil, err
	}
	t := pgschema.Qualified(cfg.Schema, cfg.Table)
	f := &Fence{
		table:       t,
		audit:       pgschema.Qualified(cfg.Schema, cfg.Table+auditTable.Suffix),
		readSQL:     "SELECT revision FROM " + t + " WHERE lease = $1",
		lockTimeout: cfg.LockTimeout,
		idleTimeout: cfg.IdleTimeout,
		rejected:    rejected,
		logger:      cfg.Logger,
		schema:      schema,
	}
	f.leases = labelcap.New(cfg.MaxLeaseLabels, func() {
		f.log().Warn("pgfence: more distinct leases rejected than Config.MaxLeaseLabels; coordkit.pgfence.rejected counts further ones as coordkit.lease=\"other\"",
			"table", t, "max_lease_labels", cfg.MaxLeaseLabels)
	})
	f.guardSQL, f.settings = guardStatement(t, cfg)
	f.restores = cfg.LockTimeout > 0
	return f, nil
}

// guardStatement builds the guard statement: record the token if it is not older
// than the recorded one, keeping the row locked, in one statement that also sets
// the transaction-local timeouts (set_config(…, true) is SET LOCAL), whose values
// are the parameters after $1 (lease) and $2 (revision). The nested subqueries fix the order: save the
// transaction's lock_timeout, then set ours and the idle timeout, then insert (and
// wait for the row lock under our lock_timeout); RETURNING, evaluated once the row
// is locked, puts the saved lock_timeout back, so that it covers the guard alone.
// The idle timeout stays for the rest of the transaction: that is its point. (A
// stale verdict returns no row and leaves our lock_timeout set: that transaction
// must roll back anyway.)
func guardStatement(table string, cfg Config) (sql string, settings []any) {
	param := func(v string) string {
		settings = append(settings, v)
		return "$" + strconv.Itoa(len(settings)+2) + "::text"
	}
	var sets []string
	if cfg.LockTimeout > 0 {
		sets = append(sets, "set_config('lock_timeout', "+param(pgtx.Millis(cfg.LockTimeout))+", true)")
	}
	if cfg.IdleTimeout > 0 {
		sets = append(sets, "set_config('idle_in_transaction_session_timeout', "+param(pgtx.Millis(cfg.IdleTimeout))+", true)")
	}
	src, restore := "VALUES ($1, $2)", ""
	if len(sets) > 0 {
		inner := ""
		if cfg.LockTimeout > 0 {
			inner = " FROM (SELECT set_config('pgfence.saved_lock_timeout', current_setting('lock_timeout'), true)) AS saved"
			restore = ", set_config('lock_timeout', current_setting('pgfence.saved_lock_timeout'), true)"
		}
		src = "SELECT $1::text, $2::bigint FROM (SELECT " + strings.Join(sets, ", ") + inner + ") AS settings"
	}
	return "INSERT INTO " + table + " AS f (lease, revision) " + src + " " +
		"ON CONFLICT (lease) DO UPDATE SET revision = excluded.revision, updated_at = now() " +
		"WHERE f.revision <= excluded.revision RETURNING f.revision" + restore, settings
}

// GuardTx fences the transaction tx with tok. It blocks while another transaction
// holds the lease's fence row, for at most Config.LockTimeout, and honours ctx (a
// cancelled ctx aborts the statement; roll tx back). It also sets tx's
// idle_in_transaction_session_timeout to Config.IdleTimeout, so that PostgreSQL
// ends tx (and frees the fence row) if its writer freezes inside it. One round
// trip. It returns:
//   - nil when tok is the newest token seen for tok.Lease() or equal to it; the
//     token is recorded and the fence row stays locked until tx ends, so every
//     write in tx is fenced (a newer holder's GuardTx waits for tx);
//   - a *coord.StaleTokenError (errors.Is coord.ErrStaleToken) when a newer token
//     was recorded: the caller is no longer the holder and must roll back and step
//     down, never retry. The rejection is logged and counted in coordkit.pgfence.rejected;
//   - a *BusyError (errors.Is ErrBusy, retryable) when the fence row stayed locked
//     by another transaction for LockTimeout: roll back, retry after a backoff;
//   - ErrZeroToken for the zero token; other errors are the database's, wrapped.
//
// On any error tx must be rolled back.
func (f *Fence) GuardTx(ctx context.Context, tx pgx.Tx, tok coord.Token) error {
	if tok.IsZero() {
		return ErrZeroToken
	}
	g := f.newGuard(tok)
	return g.verdict(ctx, tx, g.scan(tx.QueryRow(ctx, f.guardSQL, g.args...)))
}

// guard is one run of the guard statement for a token: its arguments and
// where its row goes.
type guard struct {
	f        *Fence
	tok      coord.Token
	args     []any
	rev      int64
	restored string // the transaction's own lock_timeout, back in place
}

func (f *Fence) newGuard(tok coord.Token) *guard {
	return &guard{f: f, tok: tok, args: append([]any{tok.Lease(), tok.Revision()}, f.settings...)}
}

// scan reads the guard statement's row.
func (g *guard) scan(row pgx.Row) error {
	if g.f.restores {
		return row.Scan(&g.rev, &g.restored)
	}
	return row.Scan(&g.rev)
}

// verdict turns the guard statement's outcome (err: scan's) into GuardTx's
// answer; on a stale token it reads what the fence row holds, in tx.
func (g *guard) verdict(ctx context.Context, tx pgx.Tx, err error) error {
	f, tok := g.f, g.tok
	switch {
	case err == nil:
		return nil
	case pgerr.Code(err) == pgerr.LockNotAvailable:
		return &BusyError{Token: tok, Waited: f.lockTimeout, Err: err}
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pgfence: guard %s: %w", tok, err)
	}
	// The conflicting row is ours, locked, and newer than tok: read what it holds.
	var rev int64
	if err := tx.QueryRow(ctx, f.readSQL, tok.Lease()).Scan(&rev); err != nil {
		return fmt.Errorf("pgfence: read fence of %q after rejecting %s: %w", tok.Lease(), tok, err)
	}
	return f.reject(ctx, tok, rev)
}

// Exec runs fn in a transaction fenced by tok: begin, GuardTx, fn, commit. It
// returns fn's error (the transaction rolled back), a *coord.StaleTokenError when tok
// is stale (fn is not called), a *BusyError when the fence row stayed locked for
// LockTimeout (retry), an *IdleError when PostgreSQL ended the transaction after
// it sat idle for IdleTimeout (nothing committed: retry), the commit's error when
// the server refused COMMIT (rolled back), or an error matching ErrCommitUnknown
// when the connection failed or ctx ended while COMMIT was in flight — the
// writes may have committed: resolve it with an idempotency key or a read-back,
// never by assuming. It blocks while a
// transaction with the same lease's token is in flight (up to LockTimeout); ctx
// cancels any step. The transaction commits only if fn returns nil.
//
// On a *pgxpool.Pool or a *pgx.Conn the guard is sent with BEGIN, in one round
// trip, so a fenced transaction costs the round trips of the unfenced one; on a
// pgx.Tx (a savepoint) or another Beginner, BEGIN is a round trip of its own.
func (f *Fence) Exec(ctx context.Context, db Beginner, tok coord.Token, fn func(ctx context.Context, tx pgx.Tx) error) (err error) {
	if tok.IsZero() {
		return ErrZeroToken
	}
	tx, err := f.begin(ctx, db, tok)
	if tx != nil {
		committed := false
		defer func() {
			// Also when fn panics: an open transaction would keep the fence row
			// locked and block every later holder of the lease.
			if !committed {
				pgtx.Rollback(ctx, tx)
			}
		}()
		if err == nil {
			if err = fn(ctx, tx); err == nil {
				err = commit(ctx, tx, "fenced by "+tok.String())
				committed = err == nil
			}
		}
	}
	if pgerr.Code(err) == pgerr.IdleInTransaction {
		return &IdleError{Token: tok, IdleTimeout: max(f.idleTimeout, 0), Err: err}
	}
	return err
}

// batchBeginner sends a batch that may begin a transaction (pgx.Batch.BeginTx):
// a *pgxpool.Pool, *pgxpool.Conn or *pgx.Conn. A pgx.Tx has SendBatch too, but
// refuses such a batch.
type batchBeginner interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// begin begins a transaction on db and guards it with tok. tx is nil only when
// nothing was begun; otherwise the caller rolls it back unless it commits, also
// when err is set (the guard's verdict).
func (f *Fence) begin(ctx context.Context, db Beginner, tok coord.Token) (tx pgx.Tx, err error) {
	g := f.newGuard(tok)
	bb, ok := db.(batchBeginner)
	if _, isTx := db.(pgx.Tx); !ok || isTx {
		if tx, err = db.Begin(ctx); err != nil {
			return nil, fmt.Errorf("pgfence: begin: %w", err)
		}
		return tx, g.verdict(ctx, tx, g.scan(tx.QueryRow(ctx, f.guardSQL, g.args...)))
	}
	// BEGIN and the guard in one round trip. The guard's callback runs only if
	// BEGIN succeeded; its error is the guard's.
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	guarded, gerr := false, error(nil)
	b.Queue(f.guardSQL, g.args...).QueryRow(func(row pgx.Row) error {
		guarded = true
		gerr = g.scan(row)
		return nil
	})
	br := bb.SendBatch(ctx, b)
	berr := br.Close()
	tx = br.Tx()
	if !guarded {
		if tx != nil {
			pgtx.Rollback(ctx, tx) // releases a pooled connection
		}
		return nil, fmt.Errorf("pgfence: begin: %w", cmp.Or(berr, errors.New("guard not run")))
	}
	return tx, g.verdict(ctx, tx, cmp.Or(gerr, berr))
}

// commit commits tx and classifies a failure: when ctx had ended, COMMIT is not
// sent and nothing committed; an error the server answered (a deferred
// constraint, a serialization failure) rolled the transaction back; any other
// failure leaves the outcome unknown: ErrCommitUnknown. (pgx then reports
// "conn closed"; before v5.13.0 it called that safe to retry, which it is not:
// COMMIT was sent. Nothing here asks pgconn.SafeToRetry.)
func commit(ctx context.Context, tx pgx.Tx, what string) error {
	if err := context.Cause(ctx); err != nil {
		return fmt.Errorf("pgfence: commit %s: %w", what, err)
	}
	err := tx.Commit(ctx)
	switch {
	case err == nil:
		return nil
	case pgerr.Code(err) != "" || errors.Is(err, pgx.ErrTxCommitRollback):
		return fmt.Errorf("pgfence: commit %s: %w", what, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrCommitUnknown, what, err)
}

// Highest returns the highest revision recorded for lease, or 0 when the lease has
// never presented a token. It does not lock.
func (f *Fence) Highest(ctx context.Context, db DBTX, lease string) (int64, error) {
	var rev int64
	err := db.QueryRow(ctx, f.readSQL, lease).Scan(&rev)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pgfence: read fence of %q: %w", lease, err)
	}
	return rev, nil
}

func (f *Fence) reject(ctx context.Context, tok coord.Token, highest int64) error {
	f.rejected.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attribute.String(coord.AttrLease, f.leases.Value(tok.Lease()))))
	f.log().WarnContext(ctx, "pgfence: stale fencing token rejected",
		slog.String(coord.AttrLease, tok.Lease()),
		slog.Int64("presented", tok.Revision()),
		slog.Int64("highest", highest))
	return staleError(tok, highest)
}

// log returns the configured logger, or slog.Default() at the time of the call.
func (f *Fence) log() *slog.Logger {
	if f.logger != nil {
		return f.logger
	}
	return slog.Default()
}
