// Package good is bad.go with every finding fixed: coordvet must report nothing.
package good

import (
	"context"
	"example.com/coordvete2e/corpus/defaults"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/efficiencylock"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/saga"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"go.etcd.io/etcd/client/v3/concurrency"
)

type Order struct{}

func noop(ctx context.Context, sc saga.StepContext, o *Order) error { return nil }

// ledger is where charges land, fenced.
var ledger pgfence.Beginner

func charge(ctx context.Context, tok coord.Token) error {
	return pgfence.Exec(ctx, ledger, tok, func(ctx context.Context, tx pgx.Tx) error { return nil })
}

func PlainRedis(ctx context.Context, s *concurrency.Session, rdb *redis.Client) {
	_ = s.Lease()
	rdb.Set(ctx, "cache:billing", "v", time.Minute)
}

func Fenced(ctx context.Context, s *correctnesslease.Session) error {
	lease, err := correctnesslease.Acquire(ctx, s, "billing")
	if err != nil {
		return err
	}
	defer lease.Release(ctx)
	if err := charge(lease.Context(), lease.Token()); err != nil {
		return err
	}
	return correctnesslease.Run(ctx, s, "billing", func(ctx context.Context, tok coord.Token) error {
		return charge(ctx, tok)
	}, nil)
}

func FromWire(header string) (coord.Token, error) { return coord.ParseToken(header) }

func Declared(rdb *redis.Client) (*efficiencylock.Locker, error) {
	return efficiencylock.New(rdb, efficiencylock.DuplicatesHarmless("cache warm-up rewrites the same keys"), defaults.Of3(efficiencylock.New))
}

func ThroughOutbox(ctx context.Context, ob *outbox.Outbox, tx pgx.Tx) error {
	if _, err := ob.EnqueueTx(ctx, tx, outbox.Event{Topic: "orders", Key: "o-1", Type: "order.paid", Payload: []byte("{}")}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func OnePivot() (*saga.Definition[Order], error) {
	return saga.New("order",
		saga.Compensatable("reserve", noop, noop),
		saga.Pivot("charge", noop),
		saga.Retriable("ship", noop),
	)
}

func Silenced(ctx context.Context, s *concurrency.Session) {
	//coordvet:ignore pavedroad owner=platform expires=2026-09-30 migration shim, removed with ticket OPS-12
	_ = concurrency.NewMutex(s, "/locks/legacy")
}
