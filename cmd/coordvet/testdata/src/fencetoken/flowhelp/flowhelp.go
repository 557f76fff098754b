// Package flowhelp holds helpers of another package: facts say which of their
// token parameters reach a write.
package flowhelp

import (
	"context"
	"log/slog"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
)

// Watch holds the lease but only waits on it: its token goes nowhere.
func Watch(ctx context.Context, l *correctnesslease.Lease) {
	<-l.Done()
	slog.Info("lost leadership", "token", l.Token())
}

// Charge fences its write.
func Charge(ctx context.Context, tok coord.Token) error { return pgfence.GuardTx(ctx, nil, tok) }
