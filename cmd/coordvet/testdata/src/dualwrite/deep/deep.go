package deep

import (
	"context"

	"dualwrite/deephelp"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/idempotency"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
)

type Service struct {
	pool  *pgxpool.Pool
	nc    *nats.Conn
	store *idempotency.Store
}

func (s *Service) notify(id string) error { return s.nc.Publish("orders", []byte(id)) }

func (s *Service) notifyAll(ids []string) error {
	for _, id := range ids {
		if err := s.notify(id); err != nil {
			return err
		}
	}
	return nil
}

// One call deep: the publish is in a helper of the same package.
func (s *Service) OneDeep(ctx context.Context, tx pgx.Tx, id string) error {
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	return s.notify(id) // want `OneDeep commits \(pgx.Tx.Commit, line 35\) and publishes \(notify → nats.Conn.Publish\)`
}

// Two calls deep.
func (s *Service) TwoDeep(ctx context.Context, tx pgx.Tx, ids []string) error {
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	return s.notifyAll(ids) // want `TwoDeep commits .* and publishes \(notifyAll → notify → nats.Conn.Publish\)`
}

// Across packages: both sides are helpers of another package.
func (s *Service) AcrossPackages(ctx context.Context, tx pgx.Tx, id string) error {
	if err := deephelp.Save(ctx, tx); err != nil {
		return err
	}
	return deephelp.Announce(s.nc, id) // want `AcrossPackages commits \(Save → commit → pgx.Tx.Commit, line 51\) and publishes \(Announce → nats.Conn.Publish\)`
}

// A helper's transaction callback joins the unit: publishing inside it is
// publish-then-commit.
func (s *Service) InHelperTx(ctx context.Context, id string) error {
	return deephelp.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "update orders set state = 'paid' where id = $1", id); err != nil {
			return err
		}
		return s.nc.Publish("orders.paid", []byte(id)) // want `InHelperTx commits \(InTx → pgx.BeginFunc, line 60\) and publishes \(nats.Conn.Publish\)`
	})
}

// The SDK's committing helpers are commits.
func (s *Service) AfterFencedExec(ctx context.Context, tok coord.Token, id string) error {
	err := pgfence.Exec(ctx, s.pool, tok, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "update ledger set charged = true where id = $1", id)
		return err
	})
	if err != nil {
		return err
	}
	return s.notify(id) // want `AfterFencedExec commits \(pgfence.Exec, line 70\)`
}

func (s *Service) InsideDo(ctx context.Context, key idempotency.Key, fp idempotency.Fingerprint) error {
	_, err := s.store.Do(ctx, key, fp, func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		return idempotency.Response{Status: 201}, s.notify(key.ID) // want `InsideDo commits \(idempotency.Store.Do, line 81\) and publishes \(notify`
	}, nil)
	return err
}

// An autocommitted write on the pool, then a publish.
func (s *Service) Autocommit(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, "insert into orders (id) values ($1)", id); err != nil {
		return err
	}
	return s.notify(id) // want `Autocommit commits \(autocommit pgxpool.Pool.Exec, line 89\)`
}

// A read, then a publish: no write, no dual write.
func (s *Service) ReadThenPublish(ctx context.Context, id string) error {
	rows, err := s.pool.Query(ctx, "select id from orders where id = $1", id)
	if err != nil {
		return err
	}
	rows.Close()
	return s.notify(id)
}

// A helper that does both is reported where it does, once: its caller, which
// only calls it, is not reported again.
func (s *Service) both(ctx context.Context, tx pgx.Tx, id string) error {
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	return s.notify(id) // want `both commits`
}

func (s *Service) CallsBoth(ctx context.Context, tx pgx.Tx, id string) error {
	return s.both(ctx, tx, id)
}

// A reviewed exception in the helper: it does not propagate to callers.
func (s *Service) invalidate(id string) error {
	//coordvet:ignore dualwrite owner=platform expires=2026-09-30 best-effort cache invalidation; readers re-read the row
	return s.nc.Publish("cache.invalidate", []byte(id))
}

func (s *Service) SaveAndInvalidate(ctx context.Context, tx pgx.Tx, id string) error {
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	return s.invalidate(id)
}

// The helper calls fn inside its own transaction callback: fn still runs in
// the transaction.
func (s *Service) InWrappedHelperTx(ctx context.Context, id string) error {
	return deephelp.InTxWrapped(ctx, s.pool, func(tx pgx.Tx) error {
		return s.nc.Publish("orders.paid", []byte(id)) // want `InWrappedHelperTx commits \(InTxWrapped → pgx.BeginFunc, line 134\) and publishes \(nats.Conn.Publish\)`
	})
}
