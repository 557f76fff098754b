package correctnesslease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestRunDrainExceededKeepsTheLoss: the ErrDrainExceeded Run returns also
// carries the loss that ended the term, matchable with errors.As, so a caller
// can tell a step-down from a deleted key.
func TestRunDrainExceededKeepsTheLoss(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx := context.Background()
	s := newSession(t, cli, Config{Tenant: testTenant(t), TTL: testTTL})
	release := make(chan struct{})
	defer close(release)
	started := make(chan coord.Token, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- Run(ctx, s, "stubborn", func(_ context.Context, tok coord.Token) error {
			started <- tok
			<-release // ignores its context
			return nil
		}, &RunOpts{Drain: 100 * time.Millisecond})
	}()
	tok := <-started
	if _, err := cli.Delete(ctx, s.keyFor(tok.Lease())); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		var ae *coord.AuthorityLostError
		if !errors.Is(err, ErrDrainExceeded) || !errors.As(err, &ae) || ae.Reason != coord.LossKeyDeleted {
			t.Fatalf("Run = %v, want ErrDrainExceeded wrapping a LossKeyDeleted *coord.AuthorityLostError", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the drain")
	}
}
