package correctnesslease_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// Acquire a lease and send its token with every write; the resource rejects a
// token older than the newest it has seen (see pgfence).
func ExampleAcquire() {
	cli, stop := coordtest.ExampleEtcd()
	defer stop()
	ctx := context.Background()

	s, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: "acme", TTL: 3 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)

	l, err := correctnesslease.Acquire(ctx, s, "billing")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)

	tok := l.Token()
	fmt.Println("lease:", tok.Lease())
	// Every write: pgfence.GuardTx(l.Context(), tx, tok) or the token in the
	// coord.TokenHeader of a request, and stop when l.Context() is done.
	select {
	case <-l.Context().Done():
		fmt.Println("lost:", context.Cause(l.Context()))
	default:
		fmt.Println("holding")
	}
	// Output:
	// lease: /tenants/acme/elections/billing
	// holding
}

// Run is the leader loop: the work gets a context that ends with authority and
// the token of the current term.
func ExampleRun() {
	cli, stop := coordtest.ExampleEtcd()
	defer stop()
	ctx := context.Background()
	s, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: "acme", TTL: 3 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)

	err = correctnesslease.Run(ctx, s, "compactor", func(ctx context.Context, tok coord.Token) error {
		fmt.Println("leading with a token of", tok.Lease())
		return nil // work done: Run releases and returns
	}, &correctnesslease.RunOpts{
		OnLost: func(_ coord.Token, reason coord.LossReason, _ error) { fmt.Println("term ended:", reason) },
	})
	fmt.Println("Run:", err)
	// Output:
	// leading with a token of /tenants/acme/elections/compactor
	// term ended: released
	// Run: <nil>
}
