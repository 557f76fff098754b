// Package admin is what coordctl does, for the CLI and the web console alike:
// read models of leases, fences, the outbox, sagas, idempotency keys and config
// (through the SDK's admin APIs), and mutations that compare-and-set on the state
// the operator was shown, write an audit row in the same transaction, and log.
package admin

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/audit"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/saga"
)

// Config says where coordctl finds the servers and the components' tables.
type Config struct {
	// Etcd and DB connect on first use (a command that reads only Postgres never
	// dials etcd). nil: that server is not configured.
	Etcd func(ctx context.Context) (*clientv3.Client, error)
	DB   func(ctx context.Context) (*pgxpool.Pool, error)

	// Schema holds every component's tables ("": the connection's search_path).
	Schema string
	// The components' tables; "" takes each package's default.
	FenceTable, OutboxTable, OutboxParkedTable, SagaTable, IdemTable, AuditTable string

	// Prometheus is the base URL of a Prometheus server that scrapes the
	// services, for the overview's fence rejections of the last hour ("": not shown).
	Prometheus string

	// EtcdMetrics are the etcd members' /metrics URLs (the tenants view's
	// quota, DB size, leader changes, WAL fsync and watchers); HTTPClient
	// fetches them (default http.DefaultClient; the CLI gives it etcd's TLS).
	EtcdMetrics []string
	HTTPClient  *http.Client

	// PartTimeout bounds each part of a view read from several sources (the
	// overview's leases, members, outbox, sagas, Prometheus), which are read at
	// once: a server that does not answer makes its part unknown within it
	// instead of holding the whole view. Default DefaultPartTimeout.
	PartTimeout time.Duration

	Logger *slog.Logger     // default slog.Default()
	Now    func() time.Time // default time.Now
}

// DefaultPartTimeout is Config.PartTimeout's default.
const DefaultPartTimeout = 5 * time.Second

// Errors of a missing connection.
var (
	ErrNoEtcd = errors.New("coordctl: no etcd configured (--endpoints or ETCDCTL_ENDPOINTS)")
	ErrNoDB   = errors.New("coordctl: no PostgreSQL configured (--db, DATABASE_URL or PG* variables)")
)

// Admin runs coordctl's reads and mutations. Safe for concurrent use.
type Admin struct {
	cfg   Config
	log   *slog.Logger
	trail *audit.Trail
	fence *pgfence.Fence
	ob    *outbox.Outbox

	mu   sync.Mutex
	saga *saga.Client
	idem *idempotency.Store
}

// New validates the table names and returns an Admin. It does not connect.
func New(cfg Config) (*Admin, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PartTimeout <= 0 {
		cfg.PartTimeout = DefaultPartTimeout
	}
	trail, err := audit.New(cfg.Schema, cfg.AuditTable)
	if err != nil {
		return nil, err
	}
	fence, err := pgfence.New(pgfence.Config{Schema: cfg.Schema, Table: cfg.FenceTable, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	ob, err := outbox.New(outbox.Config{Schema: cfg.Schema, Table: cfg.OutboxTable, DeadLetterTable: cfg.OutboxParkedTable})
	if err != nil {
		return nil, err
	}
	return &Admin{cfg: cfg, log: cfg.Logger, trail: trail, fence: fence, ob: ob}, nil
}

// Trail returns the audit trail.
func (a *Admin) Trail() *audit.Trail { return a.trail }

// Close releases the saga client's metric registration.
func (a *Admin) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.saga != nil {
		a.saga.Close()
	}
}

func (a *Admin) etcd(ctx context.Context) (*clientv3.Client, error) {
	if a.cfg.Etcd == nil {
		return nil, ErrNoEtcd
	}
	return a.cfg.Etcd(ctx)
}

func (a *Admin) db(ctx context.Context) (*pgxpool.Pool, error) {
	if a.cfg.DB == nil {
		return nil, ErrNoDB
	}
	return a.cfg.DB(ctx)
}

func (a *Admin) sagas(ctx context.Context) (*saga.Client, *pgxpool.Pool, error) {
	pool, err := a.db(ctx)
	if err != nil {
		return nil, nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.saga == nil {
		c, err := saga.NewClient(pool, saga.Config{Schema: a.cfg.Schema, Table: a.cfg.SagaTable, Logger: a.log, Concurrency: 1})
		if err != nil {
			return nil, nil, err
		}
		a.saga = c
	}
	return a.saga, pool, nil
}

func (a *Admin) idempotency(ctx context.Context) (*idempotency.Store, error) {
	pool, err := a.db(ctx)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.idem == nil {
		s, err := idempotency.New(pool, idempotency.Config{Schema: a.cfg.Schema, Table: a.cfg.IdemTable, Logger: a.log})
		if err != nil {
			return nil, err
		}
		a.idem = s
	}
	return a.idem, nil
}

// seconds is a duration in seconds, for JSON.
func seconds(d time.Duration) float64 { return d.Round(time.Millisecond).Seconds() }
