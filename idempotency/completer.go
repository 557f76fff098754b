package idempotency

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
)

// Defaults of CompleterConfig.
const (
	DefaultCompleterInterval = 10 * time.Second
	DefaultCompleterBatch    = 16
)

// CompleterConfig configures a Completer; the zero value is valid.
type CompleterConfig struct {
	// Interval between scans for abandoned keys. Default DefaultCompleterInterval (10s).
	Interval time.Duration
	// Batch is the most keys claimed per scan. Default DefaultCompleterBatch (16).
	Batch int
}

func (c CompleterConfig) withDefaults() CompleterConfig {
	c.Interval = cmp.Or(c.Interval, DefaultCompleterInterval)
	c.Batch = cmp.Or(c.Batch, DefaultCompleterBatch)
	return c
}

func (c CompleterConfig) validate() error {
	switch {
	case c.Interval < 0:
		return &ConfigError{Field: "Interval", Reason: "negative"}
	case c.Batch < 0:
		return &ConfigError{Field: "Batch", Reason: "negative"}
	}
	return nil
}

// Completer re-drives phased requests whose client went away: keys in progress
// whose lock expired (the process running them crashed or the client gave up). It
// takes each over with a fresh lock, as a retry would, and runs the remaining phases
// of its Operation. Several completers (one per replica) may run: a key is claimed
// by one of them with SKIP LOCKED and a lock token.
type Completer struct {
	s   *Store
	cfg CompleterConfig
	ops map[string]*Operation
}

// NewCompleter returns a Completer for the given operations (the ones whose keys it
// may resume). It returns a *ConfigError for a negative field and an error matching
// ErrInvalidOperation for a malformed or duplicated operation. It does not block;
// Run starts it.
func (s *Store) NewCompleter(cfg CompleterConfig, ops ...*Operation) (*Completer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := make(map[string]*Operation, len(ops))
	for _, op := range ops {
		if err := op.validate(); err != nil {
			return nil, err
		}
		if m[op.Name] != nil {
			return nil, fmt.Errorf("%w: operation %q given twice", ErrInvalidOperation, op.Name)
		}
		m[op.Name] = op
	}
	return &Completer{s: s, cfg: cfg, ops: m}, nil
}

// Run scans for abandoned keys every Interval and resumes them, until ctx is
// cancelled; then it returns nil. Failures are logged and retried on a later scan
// (a failed key's lock is released, or expires). It blocks; it starts no goroutine.
func (c *Completer) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := c.RunOnce(ctx); err != nil && ctx.Err() == nil {
			c.s.cfg.Logger.Warn("idempotency: completer scan", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// RunOnce claims up to Batch abandoned keys and resumes each, one after another. It
// returns how many it completed, and the first error of a claim (a failed resume is
// logged, not returned). ctx cancels it.
func (c *Completer) RunOnce(ctx context.Context) (int, error) {
	if len(c.ops) == 0 {
		return 0, nil
	}
	names := make([]string, 0, len(c.ops))
	for n := range c.ops {
		names = append(names, n)
	}
	token := make([]byte, 16)
	_, _ = rand.Read(token)
	s := c.s
	rows, err := s.pool.Query(ctx, `UPDATE `+s.table+` t SET lock_token = $1,
			locked_until = now() + $2::bigint * interval '1 millisecond', updated_at = now()
		WHERE (t.scope, t.idem_key) IN (
			SELECT scope, idem_key FROM `+s.table+`
			WHERE operation <> '' AND status = 1 AND locked_until <= now() AND operation = ANY($3)
			ORDER BY locked_until LIMIT $4 FOR UPDATE SKIP LOCKED)
		RETURNING t.scope, t.idem_key, t.operation, t.recovery_point, t.recovery_data, t.request`,
		token, s.cfg.LockTimeout.Milliseconds(), names, c.cfg.Batch)
	if err != nil {
		return 0, fmt.Errorf("idempotency: completer claim: %w", err)
	}
	type claimed struct {
		st *State
		op string
	}
	var claimedKeys []claimed
	for rows.Next() {
		st := &State{Resumed: true}
		var op string
		if err := rows.Scan(&st.Key.Scope, &st.Key.ID, &op, &st.RecoveryPoint, &st.Data, &st.Request); err != nil {
			rows.Close()
			return 0, fmt.Errorf("idempotency: completer claim: %w", err)
		}
		claimedKeys = append(claimedKeys, claimed{st, op})
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("idempotency: completer claim: %w", err)
	}
	done := 0
	for _, k := range claimedKeys {
		if _, err := s.runPhases(ctx, c.ops[k.op], k.st, token); err != nil {
			s.cfg.Logger.Warn("idempotency: completer resume", "key", k.st.Key.String(), "operation", k.op, "err", err)
			continue
		}
		done++
		s.in.recovered.Add(ctx, 1, metric.WithAttributes(attribute.String(coord.AttrOutcome, k.op)))
	}
	return done, nil
}
