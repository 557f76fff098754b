package coordkit_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/saga"
	"github.com/coordkit/coordkit/schedule"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// migrateCallers and migrateTrials: several copies of a service starting at once
// against a fresh schema, many times over.
const (
	migrateCallers = 8
	migrateTrials  = 20
)

// component is one schema owner: migrate brings its tables into being on conn.
type component struct {
	name    string
	migrate func(ctx context.Context, conn *pgx.Conn) error
}

func components(t *testing.T, pool *pgxpool.Pool) []component {
	fence, err := pgfence.New(pgfence.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ob, err := outbox.New(outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	in, err := outbox.NewInbox(outbox.InboxConfig{})
	if err != nil {
		t.Fatal(err)
	}
	barrier, err := saga.NewBarrier(saga.BarrierConfig{})
	if err != nil {
		t.Fatal(err)
	}
	sagas, err := saga.NewClient(pool, saga.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sagas.Close() })
	sched, err := schedule.NewAdmin(pool, schedule.Config{Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	return []component{
		{"pgfence", func(ctx context.Context, c *pgx.Conn) error { return fence.Migrate(ctx, c) }},
		{"idempotency", func(ctx context.Context, c *pgx.Conn) error {
			s, err := idempotency.New(nil, idempotency.Config{})
			if err != nil {
				return err
			}
			return s.Migrate(ctx, c)
		}},
		{"outbox", func(ctx context.Context, c *pgx.Conn) error { return ob.Migrate(ctx, c) }},
		{"inbox", func(ctx context.Context, c *pgx.Conn) error { return in.Migrate(ctx, c) }},
		{"saga", func(ctx context.Context, c *pgx.Conn) error { return sagas.Migrate(ctx, c) }},
		{"saga barrier", func(ctx context.Context, c *pgx.Conn) error { return barrier.Migrate(ctx, c) }},
		{"schedule", func(ctx context.Context, c *pgx.Conn) error { return sched.Migrate(ctx, c) }},
	}
}

// TestMigrateConcurrentFreshSchema: 8 processes start at once on a fresh schema and
// each runs Migrate on its own connection; all must succeed, in every trial.
func TestMigrateConcurrentFreshSchema(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Eight connections, like eight processes; each trial points them at a fresh
	// schema of its own.
	conns := make([]*pgx.Conn, migrateCallers)
	for i := range conns {
		conn, err := pgx.Connect(ctx, db.URL)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer conn.Close(context.Background())
		conns[i] = conn
	}
	for ci, c := range components(t, db.Pool) {
		t.Run(c.name, func(t *testing.T) {
			failures, calls := 0, 0
			var first error
			for trial := range migrateTrials {
				schema := pgx.Identifier{fmt.Sprintf("%s_m%d_%d", db.Schema, ci, trial)}.Sanitize()
				if _, err := db.Pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
					t.Fatal(err)
				}
				for _, conn := range conns {
					if _, err := conn.Exec(ctx, "SET search_path TO "+schema); err != nil {
						t.Fatal(err)
					}
				}
				for _, err := range migrateAtOnce(ctx, c, conns) {
					calls++
					if err != nil {
						failures++
						if first == nil {
							first = fmt.Errorf("trial %d: %w", trial, err)
						}
					}
				}
				if _, err := db.Pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
					t.Fatal(err)
				}
			}
			if failures > 0 {
				t.Fatalf("%d of %d concurrent Migrate calls failed; first: %v", failures, calls, first)
			}
		})
	}
}

// migrateAtOnce runs c's Migrate once on each connection, all released together,
// and returns their errors.
func migrateAtOnce(ctx context.Context, c component, conns []*pgx.Conn) []error {
	start := make(chan struct{})
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, conn := range conns {
		wg.Go(func() {
			<-start
			errs[i] = c.migrate(ctx, conn)
		})
	}
	close(start)
	wg.Wait()
	return errs
}
