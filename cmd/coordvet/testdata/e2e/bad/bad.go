// Package bad steps off the paved road once per check, against the real SDK.
// Each "e2e:" comment names the findings expected on its line.
package bad

import (
	"context"
	"example.com/coordvete2e/corpus/defaults"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/efficiencylock"
	"github.com/coordkit/coordkit/saga"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.etcd.io/etcd/client/v3/concurrency"
)

type Order struct{}

func noop(ctx context.Context, sc saga.StepContext, o *Order) error { return nil }

func charge(ctx context.Context) error { return nil }

func RawLocks(ctx context.Context, s *concurrency.Session, rdb *redis.Client) {
	_ = concurrency.NewMutex(s, "/locks/billing") // e2e: pavedroad
	rdb.SetNX(ctx, "lock:billing", "me", 0)       // e2e: pavedroad
}

func Unfenced(ctx context.Context, s *correctnesslease.Session) error {
	lease, err := correctnesslease.Acquire(ctx, s, "billing") // e2e: fencetoken
	if err != nil {
		return err
	}
	defer lease.Release(ctx)
	if _, err := correctnesslease.TryAcquire(ctx, s, "other"); err != nil { // e2e: fencetoken
		return err
	}
	return correctnesslease.Run(ctx, s, "billing", func(ctx context.Context, tok coord.Token) error { // e2e: fencetoken
		return charge(ctx)
	}, nil)
}

func Forged() coord.Token {
	return coord.Token{} // e2e: forgedtoken
}

func Undeclared(rdb *redis.Client, why string) (*efficiencylock.Locker, error) {
	return efficiencylock.New(rdb, efficiencylock.DuplicatesHarmless(why), defaults.Of3(efficiencylock.New)) // e2e: efficiencydecl
}

func DualWrite(ctx context.Context, tx pgx.Tx, cl *kgo.Client) error {
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	return cl.ProduceSync(ctx, &kgo.Record{Topic: "orders"}).FirstErr() // e2e: dualwrite
}

func NoPivot() (*saga.Definition[Order], error) {
	return saga.New("order", // e2e: sagapivot
		saga.Compensatable("reserve", noop, noop),
		saga.Retriable("ship", noop),
	)
}

//coordvet:ignore sagapivot // e2e: ignoredirective
var _ = 0

//coordvet:ignore dualwrite owner=platform expires=2026-09-30 nothing to silence here // e2e: dualwrite
var _ = 1
