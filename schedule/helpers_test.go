package schedule

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/testing/coordtest"
)

const testTTL = 3 * time.Second

// env is one test's servers: an embedded etcd and a fresh PostgreSQL schema
// with the fence and schedule tables and an effects table.
type env struct {
	cli    *clientv3.Client
	pool   *pgxpool.Pool
	url    string
	tenant string
	fence  *pgfence.Fence
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{cli: coordtest.Etcd(t).Client(t), tenant: coordtest.Tenant(t)}
	db := coordtest.Postgres(t)
	e.pool, e.url = db.Pool, db.URL
	ctx := testCtx(t)
	var err error
	if e.fence, err = pgfence.New(pgfence.Config{LeaseTTL: testTTL, Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
	if err := e.fence.Migrate(ctx, e.pool); err != nil {
		t.Fatal(err)
	}
	a, err := NewAdmin(e.pool, Config{Tenant: e.tenant})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Migrate(ctx, e.pool); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `CREATE TABLE effects (key text PRIMARY KEY, job text NOT NULL, token text NOT NULL, at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	return e
}

// effect is a handler that writes one row keyed by the fire's key.
func effect(ctx context.Context, tx pgx.Tx, f *Fire) error {
	_, err := tx.Exec(ctx, `INSERT INTO effects (key, job, token) VALUES ($1, $2, $3)`, f.Key(), f.Job, f.Token.String())
	return err
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// running is a Scheduler running on its own session until stop.
type running struct {
	s      *Scheduler
	sess   *correctnesslease.Session
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// start runs a scheduler with jobs on a new session; it is stopped when the
// test ends.
func (e *env) start(t *testing.T, cfg Config, jobs ...Job) *running {
	t.Helper()
	cfg.Tenant = e.tenant
	if cfg.Partitions == 0 {
		cfg.Partitions = 4
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 100 * time.Millisecond
	}
	if cfg.Fence == nil {
		cfg.Fence = e.fence
	}
	if cfg.Logger == nil {
		cfg.Logger = coordtest.Logger(t)
	}
	s, err := New(e.cli, e.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if err := s.Add(j); err != nil {
			t.Fatal(err)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := correctnesslease.NewSession(sctx, e.cli, correctnesslease.Config{Tenant: e.tenant, TTL: testTTL, Logger: cfg.Logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	r := &running{s: s, sess: sess, cancel: stop, done: make(chan error, 1)}
	go func() { r.done <- s.Run(ctx, sess) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop ends Run (a Leave) and closes the session.
func (r *running) stop(t *testing.T) {
	r.once.Do(func() {
		r.cancel()
		if err := coordtest.Recv(t, r.done, 30*time.Second, "Run to return after its context ended"); err != nil {
			t.Errorf("Run: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.sess.Close(ctx)
	})
}

// count runs a count(*) query.
func (e *env) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func coordBackoffFast() coord.Backoff {
	return coord.Backoff{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond}
}

func mapKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
