package saga

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/pgschema"
)

// Client is the saga runtime on one Postgres database: it starts sagas, runs them
// ([Client.Run]), and administers them. Safe for concurrent use. Any number of
// processes may create Clients on the same table; they share the work.
type Client struct {
	pool    *pgxpool.Pool
	cfg     Config
	q       queries
	tracer  trace.Tracer
	metrics *metrics

	mu   sync.RWMutex
	defs map[string]*erasedDef

	stats struct {
		claims, steps, compensations, retries, fenced, pages, commits atomic.Int64
	}
	// hook, when set by tests, is called at every step boundary.
	hook   func(p hookPoint, sagaID string, step int)
	schema pgschema.Component
}

type hookPoint string

const (
	hookBeforeAction     hookPoint = "before_action"
	hookAfterAction      hookPoint = "after_action"
	hookAfterCommit      hookPoint = "after_commit"
	hookBeforeCompensate hookPoint = "before_compensate"
	hookAfterCompensate  hookPoint = "after_compensate"
	hookAfterCompCommit  hookPoint = "after_compensate_commit"
)

// NewClient validates cfg and returns a Client on pool. It does not block and does
// not touch the database (call Migrate first). It registers the
// coordkit.saga.state.age callback with cfg.MeterProvider; Close unregisters it.
func NewClient(pool *pgxpool.Pool, cfg Config) (*Client, error) {
	if pool == nil {
		return nil, &ConfigError{Field: "pool", Reason: "nil"}
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	schema, err := sagaComponent(cfg.Schema, cfg.Table)
	if err != nil {
		return nil, err
	}
	c := &Client{
		pool:   pool,
		cfg:    cfg,
		q:      newQueries(cfg.Schema, cfg.Table),
		tracer: cfg.TracerProvider.Tracer(coord.InstrumentationName + "/saga"),
		defs:   map[string]*erasedDef{},
		schema: schema,
	}
	m, err := newMetrics(c)
	if err != nil {
		return nil, err
	}
	c.metrics = m
	if maxConns := int(pool.Config().MaxConns); maxConns < cfg.Concurrency {
		cfg.Logger.Warn("saga: Config.Concurrency exceeds the pool's MaxConns: runners will wait for connections to write their steps, and steps using the same pool wait too; raise MaxConns (pool_max_conns) to Concurrency plus what the steps use, or lower Concurrency (docs/pool-sizing.md)",
			"concurrency", cfg.Concurrency, "max_conns", maxConns)
	}
	return c, nil
}

// Close unregisters the client's metric callback. It does not stop a running
// [Client.Run] (cancel its context) and does not close the pool.
func (c *Client) Close() error { return c.metrics.close() }

// Register makes definitions runnable by this client's runners: [Client.Run]
// claims only sagas of registered types, and [Start] and [StartTx] start only
// registered definitions — so register a definition in every process that starts
// it, whether or not that process runs Run. Registering the same *Definition
// again does nothing; another definition with a name already registered is an
// error matching ErrInvalidDefinition.
func (c *Client) Register(defs ...AnyDefinition) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range defs {
		if d == nil {
			return fmt.Errorf("%w: nil definition", ErrInvalidDefinition)
		}
		if have, ok := c.defs[d.Name()]; ok {
			if have.src == d {
				continue
			}
			return fmt.Errorf("%w: saga type %q registered twice, with different *Definition values", ErrInvalidDefinition, d.Name())
		}
		c.defs[d.Name()] = d.erase()
	}
	return nil
}

// checkRegistered returns an error matching ErrUnknownType unless a definition
// with d's name and steps is registered: a saga of any other is never driven.
func (c *Client) checkRegistered(name, shape string) error {
	have := c.def(name)
	switch {
	case have == nil:
		return fmt.Errorf("%w: %q is not registered with this client (Client.Register it in every process that starts it)", ErrUnknownType, name)
	case have.shape != shape:
		return fmt.Errorf("%w: the definition registered as %q has other steps than the one being started", ErrUnknownType, name)
	}
	return nil
}

func (c *Client) def(name string) *erasedDef {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.defs[name]
}

func (c *Client) types() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]string, 0, len(c.defs))
	for k := range c.defs {
		out = append(out, k)
	}
	return out
}

// Stats are counters of one Client since it was created.
type Stats struct {
	Claims        int64 // sagas claimed
	Steps         int64 // forward steps committed
	Compensations int64 // compensations committed
	Retries       int64 // failed attempts scheduled for retry
	FencedWrites  int64 // state writes rejected by the claim_version fence
	Pages         int64 // pages sent (OnPage)
	// Commits counts the runner's write transactions: claims that claimed
	// something, state writes (fenced ones included) and claim releases. Divided
	// by Steps it is the commits-per-step overhead.
	Commits int64
}

// Stats returns the client's counters. It does not block.
func (c *Client) Stats() Stats {
	return Stats{
		Claims:        c.stats.claims.Load(),
		Steps:         c.stats.steps.Load(),
		Compensations: c.stats.compensations.Load(),
		Retries:       c.stats.retries.Load(),
		FencedWrites:  c.stats.fenced.Load(),
		Pages:         c.stats.pages.Load(),
		Commits:       c.stats.commits.Load(),
	}
}

func isFenced(err error) bool { return errors.Is(err, ErrClaimLost) }
