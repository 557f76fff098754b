package bad

import (
	"context"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
)

func charge(ctx context.Context, tok coord.Token) error { return pgfence.GuardTx(ctx, nil, tok) }
func chargeUnfenced(ctx context.Context) error          { return nil }

func discardedStmt(ctx context.Context, s *correctnesslease.Session) {
	correctnesslease.Acquire(ctx, s, "billing") // want `fencetoken: the lease from Acquire is discarded: its token reaches no resource; fix: keep the lease and pass its token with every write \(RFC MUST 3\)`
}

func discardedBlank(ctx context.Context, s *correctnesslease.Session) error {
	_, err := correctnesslease.TryAcquire(ctx, s, "billing") // want `lease from TryAcquire is discarded`
	if err != nil {
		return err
	}
	return chargeUnfenced(ctx)
}

func discardedVar(ctx context.Context, s *correctnesslease.Session) {
	var _, err = correctnesslease.Acquire(ctx, s, "billing") // want `lease from Acquire is discarded`
	_ = err
}

func tokenDropped(ctx context.Context, l *correctnesslease.Lease) {
	l.Token()     // want `the result of Lease.Token\(\) is dropped`
	_ = l.Token() // want `the result of Lease.Token\(\) is dropped`
}

func heldNeverFenced(ctx context.Context, s *correctnesslease.Session) error {
	lease, err := correctnesslease.Acquire(ctx, s, "billing") // want `the token of lease \(from Acquire\) reaches no write`
	if err != nil {
		return err
	}
	defer lease.Release(ctx)
	if lease == nil {
		return nil
	}
	_ = lease
	go func() {
		<-lease.Done()
	}()
	return chargeUnfenced(lease.Context())
}

func runIgnoresToken(ctx context.Context, s *correctnesslease.Session) error {
	err := correctnesslease.Run(ctx, s, "billing", func(ctx context.Context, tok coord.Token) error { // want `the callback's token tok reaches no write`
		_ = tok
		return chargeUnfenced(ctx)
	}, nil)
	if err != nil {
		return err
	}
	err = correctnesslease.Run(ctx, s, "billing", func(ctx context.Context, _ coord.Token) error { // want `the callback's fencing token _ is never used`
		return chargeUnfenced(ctx)
	}, nil)
	if err != nil {
		return err
	}
	return correctnesslease.Run(ctx, s, "billing", func(context.Context, coord.Token) error { // want `the callback's fencing token parameter is unnamed`
		return nil
	}, nil)
}

func suppressed(ctx context.Context, s *correctnesslease.Session) error {
	//coordvet:ignore fencetoken owner=platform expires=2026-09-30 leader only drives a metrics gauge, no writes
	l, err := correctnesslease.Acquire(ctx, s, "gauge")
	if err != nil {
		return err
	}
	return l.Release(ctx)
}
