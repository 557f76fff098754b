package outbox

import (
	"fmt"
	"hash/fnv"

	"github.com/coordkit/coordkit/internal/pgschema"
	"github.com/coordkit/coordkit/internal/pgtx"
)

// DBTX runs statements: a *pgxpool.Pool, *pgx.Conn or pgx.Tx (sqlc's name: Exec,
// Query, QueryRow). Single statements and reads take one.
type DBTX = pgtx.DBTX

// Beginner starts a transaction: a *pgxpool.Pool, *pgx.Conn or pgx.Tx (a
// savepoint). A call that runs its own transaction takes one.
type Beginner = pgtx.Beginner

// Execer is DBTX.
//
// Deprecated: use DBTX.
type Execer = DBTX

// Querier is both handles: what the operator API took before it took DBTX
// (Parked, Prune, Status, SchemaVersion) and Beginner (Requeue, Discard).
//
// Deprecated: use DBTX, or Beginner for Requeue and Discard.
type Querier interface {
	DBTX
	Beginner
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
	leaseClass   int32 // the relay lease (see claim.go)
	presence     int32 // the relays' presence lock (see claim.go)
	bucketClass  int32 // the keyed relays' bucket locks (see claim.go)
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
		leaseClass:   lockClass(cfg.Table + ":relay-lease"),
		presence:     lockClass(cfg.Table + ":relay-presence"),
		bucketClass:  lockClass(cfg.Table + ":relay-bucket"),
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
