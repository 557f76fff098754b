package outbox

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Execer is what Migrate needs: a *pgxpool.Pool, *pgx.Conn or pgx.Tx.
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
}

// New validates cfg (after defaults) and returns an Outbox. It returns an error
// matching ErrInvalidConfig for a bad table name or value. It does not touch the
// database.
func New(cfg Config) (*Outbox, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	t, _ := tableIdent("Table", cfg.Table)
	d, _ := tableIdent("DeadLetterTable", cfg.DeadLetterTable)
	// Lock classes come from the table's own name, without its schema: "ob" and
	// "app.ob" may name the same table and must take the same locks (two tables
	// of one name in two schemas then merely share lock slots).
	name := t[len(t)-1]
	o := &Outbox{
		cfg:          cfg,
		table:        t.Sanitize(),
		dead:         d.Sanitize(),
		channel:      pgx.Identifier{cfg.Channel}.Sanitize(),
		enqueueClass: lockClass(name + ":enqueue"),
		relayClass:   lockClass(name + ":relay"),
	}
	m, err := newMetrics(cfg.MeterProvider, true)
	if err != nil {
		return nil, fmt.Errorf("outbox: metrics: %w", err)
	}
	o.m = m
	o.sql = buildStatements(o.table, o.dead)
	return o, nil
}

// Config returns the defaulted configuration.
func (o *Outbox) Config() Config { return o.cfg }

func lockClass(s string) int32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return int32(h.Sum32())
}

// Migrate creates the outbox and dead-letter tables and their indexes if they do
// not exist. It blocks for the DDL; ctx cancels it. Idempotent.
func (o *Outbox) Migrate(ctx context.Context, db Execer) error {
	t, _ := tableIdent("Table", o.cfg.Table)
	d, _ := tableIdent("DeadLetterTable", o.cfg.DeadLetterTable)
	base, dbase := t[len(t)-1], d[len(d)-1]
	return runMigration(ctx, db, "migrations/001_outbox.sql", strings.NewReplacer(
		"{{table}}", o.table,
		"{{dead}}", o.dead,
		"{{idx_pending}}", pgx.Identifier{base + "_pending"}.Sanitize(),
		"{{idx_key}}", pgx.Identifier{base + "_key"}.Sanitize(),
		"{{idx_retry}}", pgx.Identifier{base + "_retry"}.Sanitize(),
		"{{idx_published}}", pgx.Identifier{base + "_published"}.Sanitize(),
		"{{idx_dead_key}}", pgx.Identifier{dbase + "_key"}.Sanitize(),
	))
}

func runMigration(ctx context.Context, db Execer, name string, r *strings.Replacer) error {
	b, err := migrations.ReadFile(name)
	if err != nil {
		return fmt.Errorf("outbox: migration %s: %w", name, err)
	}
	if _, err := db.Exec(ctx, r.Replace(string(b))); err != nil {
		return fmt.Errorf("outbox: migrate %s: %w", name, err)
	}
	return nil
}
