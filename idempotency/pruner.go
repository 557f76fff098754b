package idempotency

import (
	"cmp"
	"context"
	"fmt"
	"time"
)

// Defaults of PrunerConfig.
const (
	DefaultPruneInterval          = time.Minute
	DefaultPruneBatch             = 1000
	DefaultPruneMaxBatchesPerPass = 100
)

// PrunerConfig configures a Pruner; the zero value is valid.
type PrunerConfig struct {
	// Interval between prune passes. Default DefaultPruneInterval (1m).
	Interval time.Duration
	// Batch is the most rows one DELETE removes, bounding lock time and WAL per
	// statement. Default DefaultPruneBatch (1000).
	Batch int
	// MaxBatchesPerPass bounds one pass; the rest waits for the next. Default
	// DefaultPruneMaxBatchesPerPass (100).
	MaxBatchesPerPass int
}

func (c PrunerConfig) withDefaults() PrunerConfig {
	c.Interval = cmp.Or(c.Interval, DefaultPruneInterval)
	c.Batch = cmp.Or(c.Batch, DefaultPruneBatch)
	c.MaxBatchesPerPass = cmp.Or(c.MaxBatchesPerPass, DefaultPruneMaxBatchesPerPass)
	return c
}

func (c PrunerConfig) validate() error {
	switch {
	case c.Interval < 0:
		return &ConfigError{Field: "Interval", Reason: "negative"}
	case c.Batch < 0:
		return &ConfigError{Field: "Batch", Reason: "negative"}
	case c.MaxBatchesPerPass < 0:
		return &ConfigError{Field: "MaxBatchesPerPass", Reason: "negative"}
	}
	return nil
}

// Pruner deletes keys completed more than Config.Retention ago, in bounded batches
// (found through the BRIN index on created_at: a key completes after it was
// created). In-progress keys are never pruned (a phased request may still be
// resumed).
type Pruner struct {
	s   *Store
	cfg PrunerConfig
}

// NewPruner returns a Pruner for s, or a *ConfigError for a negative field. It
// does not block; Run starts it.
func (s *Store) NewPruner(cfg PrunerConfig) (*Pruner, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Pruner{s: s, cfg: cfg}, nil
}

// Run prunes every Interval until ctx is cancelled, then returns nil. Failures are
// logged and retried on the next pass. It blocks; it starts no goroutine.
func (p *Pruner) Run(ctx context.Context) error {
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := p.PruneOnce(ctx); err != nil && ctx.Err() == nil {
			p.s.cfg.Logger.Warn("idempotency: prune", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// PruneOnce deletes keys completed more than Retention ago, Batch rows per
// statement, until a statement deletes fewer than Batch or MaxBatchesPerPass
// statements ran. It returns how many rows it deleted. ctx cancels it between and during statements.
func (p *Pruner) PruneOnce(ctx context.Context) (int64, error) {
	s := p.s
	q := `DELETE FROM ` + s.table + ` WHERE ctid IN (
		SELECT ctid FROM ` + s.table + `
		WHERE status = 2 AND created_at < now() - $1::bigint * interval '1 millisecond'
			AND completed_at < now() - $1::bigint * interval '1 millisecond'
		LIMIT $2)`
	var total int64
	for i := 0; i < p.cfg.MaxBatchesPerPass; i++ {
		tag, err := s.pool.Exec(ctx, q, s.cfg.Retention.Milliseconds(), p.cfg.Batch)
		if err != nil {
			return total, fmt.Errorf("idempotency: prune: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(p.cfg.Batch) {
			break
		}
	}
	return total, nil
}
