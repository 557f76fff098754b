// Package correctnesslease is a stub of the coordkit correctness lease.
package correctnesslease

import (
	"context"

	"github.com/coordkit/coordkit/coord"
)

type Session struct{}

type Lease struct{ tok coord.Token }

func (l *Lease) Token() coord.Token                { return l.tok }
func (l *Lease) Context() context.Context          { return context.Background() }
func (l *Lease) Release(ctx context.Context) error { return nil }
func (l *Lease) Done() <-chan struct{}             { return nil }

type AcquireOpts struct{}

func Acquire(ctx context.Context, s *Session, name string) (*Lease, error) { return &Lease{}, nil }

func TryAcquire(ctx context.Context, s *Session, name string) (*Lease, error) {
	return &Lease{}, nil
}

type RunOpts struct{}

func Run(ctx context.Context, s *Session, name string, fn func(ctx context.Context, tok coord.Token) error, opts *RunOpts) error {
	l, err := Acquire(ctx, s, name)
	if err != nil {
		return err
	}
	return fn(l.Context(), l.Token())
}
