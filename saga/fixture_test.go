package saga

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// order is the saga data of the test fixture.
type order struct {
	Amount  int      `json:"amount"`
	FailAt  string   `json:"fail_at,omitempty"`  // business failure at this step
	FlakyAt string   `json:"flaky_at,omitempty"` // technical failure on the first two attempts
	Seen    []string `json:"seen,omitempty"`     // steps that ran (data mutations persist)
}

// participant is the other side of every step: it records effects through a
// barrier in its own transaction, in the same Postgres (another service's tables).
type participant struct {
	pool *pgxpool.Pool
	b    *Barrier
	// compFails makes every compensation of that step fail.
	compFails string
	mu        sync.Mutex
	calls     map[string]int // step/op -> calls
}

const effectsDDL = `CREATE TABLE IF NOT EXISTS effects (saga_id text NOT NULL, step text NOT NULL, op text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`

func newParticipant(t testing.TB, pool *pgxpool.Pool) *participant {
	t.Helper()
	ctx := context.Background()
	b, err := NewBarrier(BarrierConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, effectsDDL); err != nil {
		t.Fatal(err)
	}
	return &participant{pool: pool, b: b, calls: map[string]int{}}
}

func (p *participant) count(key string) {
	p.mu.Lock()
	p.calls[key]++
	p.mu.Unlock()
}

func (p *participant) callCount(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[key]
}

func (p *participant) effect(ctx context.Context, sc StepContext, op string, through func(context.Context, pgx.Tx, string, func(context.Context, pgx.Tx) error) (Outcome, error)) error {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := through(ctx, tx, sc.IdempotencyKey(), func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO effects (saga_id, step, op) VALUES ($1, $2, $3)`, sc.SagaID(), sc.Step(), op)
		return err
	}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (p *participant) action(prev string) Action[order] {
	return func(ctx context.Context, sc StepContext, o *order) error {
		p.count(sc.Step() + "/action")
		if o.FailAt == sc.Step() {
			return Fail(fmt.Errorf("%s declined", sc.Step()))
		}
		if o.FlakyAt == sc.Step() && sc.Attempt() <= 2 {
			return errors.New("flaky: connection reset")
		}
		if prev != "" {
			var out string
			if err := sc.Output(prev, &out); err != nil || out != prev+":"+sc.SagaID() {
				// Recorded, and asserted absent by the tests.
				if _, err := p.pool.Exec(ctx, `INSERT INTO effects (saga_id, step, op) VALUES ($1, $2, 'missing_output')`, sc.SagaID(), sc.Step()); err != nil {
					return err
				}
			}
		}
		if err := p.effect(ctx, sc, "action", p.b.ActionTx); err != nil {
			return err
		}
		o.Seen = append(o.Seen, sc.Step())
		return sc.SetOutput(sc.Step() + ":" + sc.SagaID())
	}
}

func (p *participant) compensation() Action[order] {
	return func(ctx context.Context, sc StepContext, o *order) error {
		p.count(sc.Step() + "/compensate")
		if p.compFails == sc.Step() {
			return errors.New("refund API is down")
		}
		return p.effect(ctx, sc, "compensate", p.b.CompensateTx)
	}
}

// steps of the fixture: reserve, charge (compensatable), ship (pivot), notify,
// receipt (retriable).
var fixtureSteps = []string{"reserve", "charge", "ship", "notify", "receipt"}

// orderDefinition is the fixture's saga "order" of fixtureSteps, run at p.
func orderDefinition(p *participant) (*Definition[order], error) {
	return New("order",
		Compensatable("reserve", p.action(""), p.compensation()),
		Compensatable("charge", p.action("reserve"), p.compensation()),
		Pivot("ship", p.action("charge")),
		Retriable("notify", p.action("ship")),
		Retriable("receipt", p.action("notify")),
	)
}

func orderSaga(t testing.TB, p *participant) *Definition[order] {
	t.Helper()
	d, err := orderDefinition(p)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// fastConfig keeps tests quick: short backoff, claim TTL and polling.
func fastConfig() Config {
	return Config{
		Concurrency:  8,
		ClaimTTL:     2 * time.Second,
		PollInterval: 100 * time.Millisecond,
		Backoff:      coord.Backoff{Base: 5 * time.Millisecond, Cap: 50 * time.Millisecond},
		Logger:       slog.New(slog.DiscardHandler),
	}
}

type env struct {
	db *coordtest.PostgresDB
	p  *participant
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db := coordtest.Postgres(t)
	migrateTable(t, db.Pool, DefaultTable)
	return &env{db: db, p: newParticipant(t, db.Pool)}
}

// migrateTable creates the saga table called table.
func migrateTable(t *testing.T, pool *pgxpool.Pool, table string) {
	t.Helper()
	c, err := NewClient(pool, Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
}

// client returns a client with the order saga registered.
func (e *env) client(t *testing.T, cfg Config) (*Client, *Definition[order]) {
	t.Helper()
	c, err := NewClient(e.db.Pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	def := orderSaga(t, e.p)
	if err := c.Register(def); err != nil {
		t.Fatal(err)
	}
	return c, def
}

// newFastClient is a new env and its client of fastConfig, the order saga
// registered.
func newFastClient(t *testing.T) (*env, *Client, *Definition[order]) {
	t.Helper()
	e := newEnv(t)
	c, def := e.client(t, fastConfig())
	return e, c, def
}

// start is Start, failing the test on its error.
func start(t testing.TB, ctx context.Context, c *Client, def *Definition[order], o order, opts *StartOpts) string {
	t.Helper()
	id, err := Start(ctx, c, def, o, opts)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// run runs c until the test ends.
func run(t *testing.T, c *Client) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := coordtest.Recv(t, done, 30*time.Second, "Run returning after its context was cancelled"); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func waitState(t *testing.T, c *Client, id string, timeout time.Duration, want ...State) Info {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		i, err := c.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if i.State == w {
				return i
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("saga %s is %s at step %d (last error %q), want %v", id, i.State, i.Step, i.LastError, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// effects returns "step/op" -> count for one saga.
func effects(t testing.TB, pool *pgxpool.Pool, id string) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT step || '/' || op, count(*) FROM effects WHERE saga_id = $1 GROUP BY 1`, id)
	if err != nil {
		t.Fatal(err)
	}
	m, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (kv [2]any, err error) {
		var k string
		var n int
		err = r.Scan(&k, &n)
		return [2]any{k, n}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, kv := range m {
		out[kv[0].(string)] = kv[1].(int)
	}
	return out
}
