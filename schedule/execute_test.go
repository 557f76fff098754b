package schedule

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// direct is a Scheduler whose transactions a test runs by hand (no Run).
func (e *env) direct(t *testing.T, pool *pgxpool.Pool, jobs ...Job) *Scheduler {
	t.Helper()
	s, err := New(e.cli, pool, Config{Tenant: e.tenant, Partitions: 4, Logger: coordtest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if err := s.Add(j); err != nil {
			t.Fatal(err)
		}
	}
	s.fence = e.fence
	r := s.newRunner(testCtx(t), coord.Token{}, s.jobList())
	if err := r.load(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *Scheduler) jobList() []*job {
	var out []*job
	for _, j := range s.jobs {
		out = append(out, j)
	}
	return out
}

// tokens returns two tokens of the job's partition lease, older first.
func (e *env) tokens(t *testing.T, job string) (older, newer coord.Token) {
	t.Helper()
	ctx := testCtx(t)
	sess, err := correctnesslease.NewSession(ctx, e.cli, correctnesslease.Config{Tenant: e.tenant, TTL: testTTL, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx)
	name := ownership.LeaseName(DefaultGroup, PartitionOf(job, 4))
	var toks []coord.Token
	for range 2 {
		l, err := correctnesslease.Acquire(ctx, sess, name)
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, l.Token())
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return toks[0], toks[1]
}

func (s *Scheduler) task(name string, nominal time.Time) *task {
	j := s.jobs[name]
	return &task{job: j, id: ID{Tenant: s.cfg.Tenant, Job: name, Local: civil(nominal, j.spec.loc)}, nominal: nominal, kind: KindScheduled}
}

// TestStaleTokenRejectedByTheFence: a fire sent with the partition's older
// token after a newer one wrote is refused by the fence before the handler
// runs, and counted as a duplicate rejected by the fence.
func TestStaleTokenRejectedByTheFence(t *testing.T) {
	e := newEnv(t)
	var calls atomic.Int32
	h := func(ctx context.Context, tx pgx.Tx, f *Fire) error { calls.Add(1); return effect(ctx, tx, f) }
	s := e.direct(t, e.pool, Job{Name: "bill", Every: time.Hour, Handler: h})
	older, newer := e.tokens(t, "bill")
	ctx := testCtx(t)
	at := time.Now().Add(time.Hour).Truncate(time.Hour)
	if v, _, _, err := s.execute(ctx, newer, s.task("bill", at), 1); v != committed {
		t.Fatalf("newer token: verdict %d, %v", v, err)
	}
	if v, _, _, err := s.execute(ctx, older, s.task("bill", at.Add(time.Hour)), 1); v != stale || !errorsIs(err, coord.ErrStaleToken) {
		t.Fatalf("older token: verdict %d, %v; want stale", v, err)
	}
	if c := calls.Load(); c != 1 {
		t.Errorf("handler called %d times, want 1 (never for the stale token)", c)
	}
}

// TestSameFireTwiceRunsOnce: the same fire executed again (a retry after an
// unknown commit) is refused by its key before the handler runs; and when the
// record lands between the rider's read and the commit (another transaction
// recorded it meanwhile), the record statement fails, so the handler's effect
// rolls back with the COMMIT that rode with it.
func TestSameFireTwiceRunsOnce(t *testing.T) {
	e := newEnv(t)
	var calls atomic.Int32
	var race func()
	h := func(ctx context.Context, tx pgx.Tx, f *Fire) error {
		calls.Add(1)
		if race != nil {
			race()
		}
		return effect(ctx, tx, f)
	}
	s := e.direct(t, e.pool, Job{Name: "bill", Every: time.Hour, Handler: h})
	_, tok := e.tokens(t, "bill")
	ctx := testCtx(t)
	at := time.Now().Add(time.Hour).Truncate(time.Hour)
	if v, _, _, err := s.execute(ctx, tok, s.task("bill", at), 1); v != committed {
		t.Fatalf("first: verdict %d, %v", v, err)
	}
	if v, _, _, err := s.execute(ctx, tok, s.task("bill", at), 1); v != duplicate {
		t.Fatalf("again: verdict %d, %v; want duplicate", v, err)
	}
	if c := calls.Load(); c != 1 {
		t.Errorf("handler called %d times, want 1", c)
	}
	// The race: the record of the next fire appears while the handler runs.
	next := at.Add(time.Hour)
	race = func() {
		if _, err := e.pool.Exec(ctx, `INSERT INTO coord_schedule_fires (tenant, job, local_time, fold, nominal, kind, outcome)
			VALUES ($1, 'bill', $2, 0, $3, 'scheduled', 'ok')`, e.tenant, civil(next, time.UTC), next); err != nil {
			t.Error(err)
		}
	}
	if v, _, _, err := s.execute(ctx, tok, s.task("bill", next), 1); v != duplicate {
		t.Fatalf("raced: verdict %d, %v; want duplicate", v, err)
	}
	if n := e.count(t, `SELECT count(*) FROM effects`); n != 1 {
		t.Errorf("%d effects, want 1: the raced fire's effect committed", n)
	}
}

// TestTwoRoundTripsPerFire: in steady state a fire costs two round trips
// beyond its handler's statements (BEGIN + guard + rider; record + COMMIT),
// counted on the wire.
func TestTwoRoundTripsPerFire(t *testing.T) {
	e := newEnv(t)
	cfg, err := pgxpool.ParseConfig(e.url)
	if err != nil {
		t.Fatal(err)
	}
	var trips atomic.Int64
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, trips: &trips}, nil
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(testCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	handlerStmts := 1
	s := e.direct(t, pool, Job{Name: "bill", Every: time.Hour, Handler: effect})
	_, tok := e.tokens(t, "bill")
	ctx := testCtx(t)
	at := time.Now().Add(time.Hour).Truncate(time.Hour)
	for i := range 5 { // warm: statements prepared on the connection
		if v, _, _, err := s.execute(ctx, tok, s.task("bill", at.Add(time.Duration(i)*time.Hour)), 1); v != committed {
			t.Fatalf("warm-up: %d %v", v, err)
		}
	}
	const n = 20
	before := trips.Load()
	for i := range n {
		if v, _, _, err := s.execute(ctx, tok, s.task("bill", at.Add(time.Duration(10+i)*time.Hour)), 1); v != committed {
			t.Fatalf("fire: %d %v", v, err)
		}
	}
	per := float64(trips.Load()-before) / n
	t.Logf("round trips per fire: %.2f (the handler's own: %d)", per, handlerStmts)
	if per > float64(handlerStmts+2) {
		t.Errorf("%.2f round trips per fire, want at most %d (2 beyond the handler's %d)", per, handlerStmts+2, handlerStmts)
	}
}

// countingConn counts round trips: a write that follows a read (or the
// first write) starts one.
type countingConn struct {
	net.Conn
	trips   *atomic.Int64
	reading atomic.Bool
}

func (c *countingConn) Write(p []byte) (int, error) {
	if c.reading.Swap(false) || c.trips.Load() == 0 {
		c.trips.Add(1)
	}
	return c.Conn.Write(p)
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.reading.Store(true)
	return c.Conn.Read(p)
}
