package good

import (
	"context"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
)

func charge(ctx context.Context, tok coord.Token) error { return pgfence.GuardTx(ctx, nil, tok) }

type worker struct{ lease *correctnesslease.Lease }

func (w *worker) run(ctx context.Context) { _ = charge(ctx, w.lease.Token()) }

var global *correctnesslease.Lease

func fenced(ctx context.Context, s *correctnesslease.Session) error {
	lease, err := correctnesslease.Acquire(ctx, s, "billing")
	if err != nil {
		return err
	}
	defer lease.Release(ctx)
	return charge(lease.Context(), lease.Token())
}

func fencedInClosure(ctx context.Context, s *correctnesslease.Session) error {
	lease, err := correctnesslease.Acquire(ctx, s, "billing")
	if err != nil {
		return err
	}
	return func() error { return charge(ctx, lease.Token()) }()
}

func returned(ctx context.Context, s *correctnesslease.Session) (*correctnesslease.Lease, error) {
	lease, err := correctnesslease.Acquire(ctx, s, "billing")
	return lease, err
}

func returnedDirectly(ctx context.Context, s *correctnesslease.Session) (*correctnesslease.Lease, error) {
	return correctnesslease.Acquire(ctx, s, "billing")
}

func passedOn(ctx context.Context, s *correctnesslease.Session) error {
	lease, err := correctnesslease.Acquire(ctx, s, "billing")
	if err != nil {
		return err
	}
	return work(ctx, lease)
}

func work(ctx context.Context, l *correctnesslease.Lease) error { return charge(ctx, l.Token()) }

func stored(ctx context.Context, s *correctnesslease.Session, w *worker) error {
	var err error
	w.lease, err = correctnesslease.Acquire(ctx, s, "billing")
	if err != nil {
		return err
	}
	global, err = correctnesslease.Acquire(ctx, s, "other")
	l2, err := correctnesslease.Acquire(ctx, s, "third")
	w2 := &worker{lease: l2}
	go w2.run(ctx)
	ch := make(chan *correctnesslease.Lease, 1)
	l3, _ := correctnesslease.Acquire(ctx, s, "fourth")
	ch <- l3
	return err
}

func tokenKept(l *correctnesslease.Lease) coord.Token {
	tok := l.Token()
	return tok
}

func run(ctx context.Context, s *correctnesslease.Session) error {
	return correctnesslease.Run(ctx, s, "billing", func(ctx context.Context, tok coord.Token) error {
		return charge(ctx, tok)
	}, nil)
}

func namedResult(ctx context.Context, s *correctnesslease.Session) (lease *correctnesslease.Lease, err error) {
	lease, err = correctnesslease.Acquire(ctx, s, "billing")
	return
}
