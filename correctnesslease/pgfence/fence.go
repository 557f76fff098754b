package pgfence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/pgschema"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// DBTX is what a single fenced statement needs: a *pgxpool.Pool, *pgx.Conn or pgx.Tx.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Beginner starts a transaction: a *pgxpool.Pool, *pgx.Conn or pgx.Tx (a savepoint).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Fence checks fencing tokens against a fence table. It is safe for concurrent use
// and holds no connection of its own.
type Fence struct {
	table    string // quoted
	guardSQL string
	readSQL  string
	rejected metric.Int64Counter
	logger   *slog.Logger
	schema   pgschema.Component
}

// New validates cfg (see Config for defaults) and returns a Fence. It does not touch
// the database; call Migrate (or apply MigrationSQL with your own tool) first. An
// invalid table or schema name is a *ConfigError (ErrInvalidConfig) that unwraps to
// the *coord.NameError.
func New(cfg Config) (*Fence, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rejected, err := cfg.MeterProvider.Meter(coord.InstrumentationName+"/correctnesslease/pgfence").
		Int64Counter(coord.MetricFenceRejected,
			metric.WithDescription("Writes rejected because their fencing token was older than the newest accepted."),
			metric.WithUnit("{write}"))
	if err != nil {
		return nil, fmt.Errorf("pgfence: counter %s: %w", coord.MetricFenceRejected, err)
	}
	schema, err := component(cfg.Schema, cfg.Table)
	if err != nil {
		return nil, err
	}
	t := pgschema.Qualified(cfg.Schema, cfg.Table)
	return &Fence{
		table: t,
		guardSQL: "INSERT INTO " + t + " AS f (lease, revision) VALUES ($1, $2) " +
			"ON CONFLICT (lease) DO UPDATE SET revision = excluded.revision, updated_at = now() " +
			"WHERE f.revision <= excluded.revision RETURNING f.revision",
		readSQL:  "SELECT revision FROM " + t + " WHERE lease = $1",
		rejected: rejected,
		logger:   cfg.Logger,
		schema:   schema,
	}, nil
}

// GuardTx fences the transaction tx with tok. It blocks while another transaction
// holds the lease's fence row, and honours ctx (a cancelled ctx aborts the
// statement; roll tx back). It returns:
//   - nil when tok is the newest token seen for tok.Lease() or equal to it; the
//     token is recorded and the fence row stays locked until tx ends, so every
//     write in tx is fenced (a newer holder's GuardTx waits for tx);
//   - a *coord.StaleTokenError (errors.Is coord.ErrStaleToken) when a newer token
//     was recorded: the caller is no longer the holder and must roll back and step
//     down, never retry. The rejection is logged and counted in coord.fence.rejected;
//   - ErrZeroToken for the zero token; other errors are the database's, wrapped.
//
// On any error tx must be rolled back.
func (f *Fence) GuardTx(ctx context.Context, tx pgx.Tx, tok coord.Token) error {
	if tok.IsZero() {
		return ErrZeroToken
	}
	var rev int64
	err := tx.QueryRow(ctx, f.guardSQL, tok.Lease(), tok.Revision()).Scan(&rev)
	if err == nil {
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("pgfence: guard %s: %w", tok, err)
	}
	// The conflicting row is ours, locked, and newer than tok: read what it holds.
	if err := tx.QueryRow(ctx, f.readSQL, tok.Lease()).Scan(&rev); err != nil {
		return fmt.Errorf("pgfence: read fence of %q after rejecting %s: %w", tok.Lease(), tok, err)
	}
	return f.reject(ctx, tok, rev)
}

// Exec runs fn in a transaction fenced by tok: begin, GuardTx, fn, commit. It
// returns fn's error (the transaction rolled back), a *coord.StaleTokenError when tok
// is stale (fn is not called), or the commit's error. It blocks while a transaction
// with the same lease's token is in flight; ctx cancels any step. The transaction
// commits only if fn returns nil.
func (f *Fence) Exec(ctx context.Context, db Beginner, tok coord.Token, fn func(ctx context.Context, tx pgx.Tx) error) (err error) {
	if tok.IsZero() {
		return ErrZeroToken
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgfence: begin: %w", err)
	}
	committed := false
	defer func() {
		// Also when fn panics: an open transaction would keep the fence row
		// locked and block every later holder of the lease.
		if !committed {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err = f.GuardTx(ctx, tx, tok); err != nil {
		return err
	}
	if err = fn(ctx, tx); err != nil {
		return err
	}
	if err = tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgfence: commit fenced by %s: %w", tok, err)
	}
	committed = true
	return nil
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
	f.rejected.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attribute.String(coord.AttrLease, tok.Lease())))
	logger := f.logger
	if logger == nil {
		logger = slog.Default()
	}
	logger.WarnContext(ctx, "pgfence: stale fencing token rejected",
		slog.String(coord.AttrLease, tok.Lease()),
		slog.Int64("presented", tok.Revision()),
		slog.Int64("highest", highest))
	return staleError(tok, highest)
}
