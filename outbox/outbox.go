package outbox

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/coordkit/coordkit/internal/pgschema"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Execer runs a statement: a *pgxpool.Pool, *pgx.Conn or pgx.Tx.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Querier is what the operator API (Parked, Requeue, Discard, Prune) needs: a
// *pgxpool.Pool or *pgx.Conn.
type Querier interface {
	Execer
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Outbox writes events into the outbox table and builds relays that publish them.
// It holds no connection; it is safe for concurrent use.
type Outbox struct {
	cfg     Config
	table   string // quoted
	dead    string // quoted
	channel string // quoted for LISTEN
	// advisory lock classes (first key of the two-int advisory locks), derived
	// from the table name so two outboxes in one database never contend.
	enqueueClass int32
	relayClass   int32
	m            *metrics
	sql          statements
	schema       pgschema.Component
}

// New validates cfg (after defaults) and returns an Outbox. It returns a
// *ConfigError (ErrInvalidConfig) for a bad name or value. It does not touch the
// database.
func New(cfg Config) (*Outbox, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// Lock classes come from the table's own name, without its schema: a table
	// named with and without its Schema must take the same locks (two tables of
	// one name in two schemas then merely share lock slots).
	o := &Outbox{
		cfg:          cfg,
		table:        pgschema.Qualified(cfg.Schema, cfg.Table),
		dead:         pgschema.Qualified(cfg.Schema, cfg.DeadLetterTable),
		channel:      pgschema.Quoted(cfg.Channel),
		enqueueClass: lockClass(cfg.Table + ":enqueue"),
		relayClass:   lockClass(cfg.Table + ":relay"),
	}
	m, err := newMetrics(cfg.MeterProvider, true)
	if err != nil {
		return nil, fmt.Errorf("outbox: metrics: %w", err)
	}
	o.m = m
	o.sql = buildStatements(o.table, o.dead)
	if o.schema, err = outboxComponent(cfg); err != nil {
		return nil, err
	}
	return o, nil
}

// Config returns the defaulted configuration.
func (o *Outbox) Config() Config { return o.cfg }

func lockClass(s string) int32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return int32(h.Sum32())
}
