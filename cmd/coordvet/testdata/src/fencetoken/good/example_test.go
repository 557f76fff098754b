package good

import (
	"context"

	"github.com/coordkit/coordkit/correctnesslease"
)

func Example() {
	ctx := context.Background()
	var s *correctnesslease.Session
	lease, err := correctnesslease.Acquire(ctx, s, "billing")
	if err != nil {
		return
	}
	defer lease.Release(ctx)
	_ = charge(ctx, lease.Token())
}
