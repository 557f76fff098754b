package outbox

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/internal/pgschema"
	"github.com/coordkit/coordkit/internal/pgtext"
)

// Defaults of InboxConfig.
const (
	DefaultInboxTable      = "coord_inbox"
	DefaultInboxRetention  = 7 * 24 * time.Hour
	DefaultInboxPruneBatch = 5000
)

// processedIdx is the inbox table's index, named after InboxConfig.Table.
var processedIdx = pgschema.Derived{Suffix: "_processed", What: "index"}

// InboxConfig configures an Inbox. Every field states its default.
type InboxConfig struct {
	// Schema holds the inbox table. Default "": the connection's search_path.
	Schema string
	// Table is the inbox table. Default DefaultInboxTable. Same rule as
	// Config.Table, with its index Table + "_processed".
	Table string
	// Retention is how long processed event ids are remembered. It must exceed the
	// producer's redelivery horizon: the longest time after which an event can be
	// delivered again (relay retries until parking, a requeue after an operator's
	// fix, broker retention and consumer replays). Default DefaultInboxRetention
	// (7 days).
	Retention time.Duration
	// PruneBatch bounds the rows one prune statement deletes. Default
	// DefaultInboxPruneBatch (5000).
	PruneBatch int
	// MeterProvider provides the duplicates counter. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
}

// Inbox dedupes deliveries on the consumer side: the event id is recorded in the
// same transaction as the consumer's effect.
type Inbox struct {
	cfg    InboxConfig
	table  string
	m      *metrics
	schema pgschema.Component
}

var consumerName = regexp.MustCompile(`^[\x21-\x7e]{1,200}$`)

func (c InboxConfig) withDefaults() InboxConfig {
	c.Table = cmp.Or(c.Table, DefaultInboxTable)
	c.Retention = cmp.Or(c.Retention, DefaultInboxRetention)
	c.PruneBatch = cmp.Or(c.PruneBatch, DefaultInboxPruneBatch)
	c.MeterProvider = cmp.Or(c.MeterProvider, otel.GetMeterProvider())
	return c
}

// validate checks an InboxConfig after withDefaults. Errors are *ConfigError.
func (c InboxConfig) validate() error {
	if ne := pgschema.CheckTable(c.Schema, c.Table, processedIdx); ne != nil {
		return nameError(ne)
	}
	switch {
	case c.Retention < 0:
		return &ConfigError{Field: "Retention", Reason: "negative"}
	case c.PruneBatch < 1:
		return &ConfigError{Field: "PruneBatch", Reason: "below 1"}
	}
	return nil
}

// NewInbox validates cfg and returns an Inbox, or a *ConfigError. It does not
// touch the database.
func NewInbox(cfg InboxConfig) (*Inbox, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.MeterProvider, false)
	if err != nil {
		return nil, fmt.Errorf("outbox: inbox metrics: %w", err)
	}
	schema, err := inboxComponent(cfg)
	if err != nil {
		return nil, err
	}
	return &Inbox{cfg: cfg, table: pgschema.Qualified(cfg.Schema, cfg.Table), m: m, schema: schema}, nil
}

// ProcessTx runs fn in tx unless consumer already processed eventID: it records
// (consumer, eventID) in tx first, so the record and fn's effects commit or roll
// back together. It returns (true, nil) when fn ran and succeeded, (false, nil)
// for a duplicate (fn not called; counted in coordkit.outbox.inbox.duplicates), or fn's
// error / the database error (the caller must roll back tx). A concurrent
// delivery of the same event blocks on the first one's row until that
// transaction ends, then sees a duplicate (or proceeds, if it rolled back).
func (in *Inbox) ProcessTx(ctx context.Context, tx pgx.Tx, consumer, eventID string, fn func(ctx context.Context, tx pgx.Tx) error) (bool, error) {
	if !consumerName.MatchString(consumer) {
		return false, &ConfigError{Field: "consumer", Reason: fmt.Sprintf("%q: 1-200 printable ASCII bytes", pgtext.Clean(consumer, quoted))}
	}
	if eventID == "" || pgtext.Clean(eventID, 200) != eventID { // Clean changes what text cannot store
		return false, &EventError{Field: "id", Err: ErrInvalidID, Reason: "empty, longer than 200 bytes, not UTF-8 or with a NUL byte"}
	}
	tag, err := tx.Exec(ctx, `INSERT INTO `+in.table+` (consumer, event_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, consumer, eventID)
	if err != nil {
		return false, fmt.Errorf("outbox: inbox: %w", err)
	}
	if tag.RowsAffected() == 0 {
		in.m.dups.Add(ctx, 1, metric.WithAttributes(attribute.String(attrConsumer, consumer)))
		return false, nil
	}
	if err := fn(ctx, tx); err != nil {
		return false, err
	}
	return true, nil
}

// Prune forgets processed ids older than Retention, in bounded statements; it
// returns how many it deleted.
func (in *Inbox) Prune(ctx context.Context, db DBTX) (int64, error) {
	var total int64
	for {
		tag, err := db.Exec(ctx, `DELETE FROM `+in.table+` WHERE ctid IN (SELECT ctid FROM `+in.table+
			` WHERE processed_at < clock_timestamp() - $1::bigint * interval '1 millisecond' LIMIT $2)`,
			in.cfg.Retention.Milliseconds(), in.cfg.PruneBatch)
		if err != nil {
			return total, fmt.Errorf("outbox: inbox prune: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(in.cfg.PruneBatch) {
			return total, nil
		}
	}
}
