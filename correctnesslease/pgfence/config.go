package pgfence

import (
	"cmp"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/internal/pgschema"
)

// Defaults of Config.
const (
	// DefaultTable is the fence table's name.
	DefaultTable = "coord_fences"
	// DefaultLeaseTTL is correctnesslease.DefaultTTL, the TTL that IdleTimeout and
	// LockTimeout derive from.
	DefaultLeaseTTL = 15 * time.Second
	// DefaultMaxLeaseLabels is how many distinct lease names a Fence reports in
	// the coordkit.lease attribute of coordkit.pgfence.rejected before it reports "other".
	DefaultMaxLeaseLabels = 100
)

// auditTable is the derived name of the table FenceReset records into.
var auditTable = pgschema.Derived{Suffix: "_audit", What: "audit table"}

// Config configures a Fence. The zero Config is valid.
type Config struct {
	// Schema holds the fence table. Default "": the connection's search_path.
	Schema string
	// Table is the fence table's name. Default DefaultTable. Any printable UTF-8
	// of at most 63 bytes (57, so that the audit table Table+"_audit" fits) and
	// without '.'; it is always quoted, never concatenated raw.
	Table string
	// MeterProvider provides the coordkit.pgfence.rejected counter. Default
	// otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Logger receives a warning for every rejected token and every fence reset.
	// Default slog.Default() (looked up at each use, so slog.SetDefault applies).
	Logger *slog.Logger
	// MaxLeaseLabels bounds the distinct values of the coordkit.lease attribute of
	// coordkit.pgfence.rejected: the first MaxLeaseLabels lease names get their own
	// value, later ones are counted as "other" (the log line of every rejection
	// carries the full name). Default DefaultMaxLeaseLabels; must not be negative.
	MaxLeaseLabels int

	// LeaseTTL is the TTL of the correctness leases whose tokens this Fence
	// checks (correctnesslease.Config.TTL). Default DefaultLeaseTTL. Only the
	// defaults of IdleTimeout and LockTimeout derive from it.
	LeaseTTL time.Duration
	// IdleTimeout becomes the transaction-local idle_in_transaction_session_timeout
	// of every transaction GuardTx fences: PostgreSQL ends the session of a writer
	// that stays idle inside its fenced transaction for longer — a holder frozen
	// by a GC pause, SIGSTOP or a stalled VM — which rolls the transaction back and
	// frees the fence row for the successor. Default LeaseTTL/3: etcd grants the
	// lease to a successor no sooner than a TTL after the holder's last renewal,
	// which a healthy holder sent at most TTL/3 before it froze, so the frozen
	// transaction is gone by then. Keep fenced transactions short: one that idles
	// longer between two statements (waiting on a remote call, say) is ended too.
	// Negative: do not set it (the server's setting applies).
	IdleTimeout time.Duration
	// LockTimeout bounds how long GuardTx waits for the lease's fence row while
	// another transaction holds it (a lock_timeout for the guard statement only;
	// the transaction's own lock_timeout applies again after it). On expiry GuardTx
	// returns a *BusyError (ErrBusy): roll back and retry after a backoff. Default
	// LeaseTTL/3. Negative: wait without bound.
	LockTimeout time.Duration
}

func (c Config) withDefaults() Config {
	c.Table = cmp.Or(c.Table, DefaultTable)
	c.MeterProvider = cmp.Or(c.MeterProvider, otel.GetMeterProvider())
	c.MaxLeaseLabels = cmp.Or(c.MaxLeaseLabels, DefaultMaxLeaseLabels)
	c.LeaseTTL = cmp.Or(c.LeaseTTL, DefaultLeaseTTL)
	if c.IdleTimeout == 0 {
		c.IdleTimeout = c.LeaseTTL / 3
	}
	if c.LockTimeout == 0 {
		c.LockTimeout = c.LeaseTTL / 3
	}
	return c
}

// validate checks a Config after withDefaults. Errors are *ConfigError.
func (c Config) validate() error {
	if ne := pgschema.CheckTable(c.Schema, c.Table, auditTable); ne != nil {
		return nameError(ne)
	}
	if c.LeaseTTL < 0 {
		return &ConfigError{Field: "LeaseTTL", Reason: c.LeaseTTL.String() + " is negative"}
	}
	if c.MaxLeaseLabels < 0 {
		return &ConfigError{Field: "MaxLeaseLabels", Reason: "negative"}
	}
	return nil
}
