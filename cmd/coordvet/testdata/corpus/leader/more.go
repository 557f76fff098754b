package leader

import (
	"context"

	"example.com/coordvete2e/corpus/fencing"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
)

func (j *Job) charge(ctx context.Context, tok coord.Token) error {
	return fencing.ChargeAll(ctx, j.Pool, tok)
}

//corpus:negative
func (j *Job) InGoroutine(ctx context.Context) error {
	lease, err := correctnesslease.Acquire(ctx, j.Session, "billing")
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- j.charge(lease.Context(), lease.Token()) }()
	return <-errc
}

//corpus:negative
func (j *Job) LoopThroughHelper(ctx context.Context) error {
	return correctnesslease.Run(ctx, j.Session, "billing", func(ctx context.Context, tok coord.Token) error {
		return j.charge(ctx, tok)
	}, nil)
}
