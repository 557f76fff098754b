package ownership_test

import (
	"context"
	"fmt"

	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// A worker joins a group of 4 partitions on its session and serves what it is
// given: each partition comes with its own context (cancelled when it must stop)
// and its own fencing token (send it with every write of that partition, e.g.
// through pgfence.Exec). On a revoke the worker stops the partition's work and
// calls Done, and the next owner takes it over at once.
func Example() {
	cli, stop := coordtest.ExampleEtcd()
	defer stop()
	ctx := context.Background()

	s, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: "acme"})
	if err != nil {
		fmt.Println("session:", err)
		return
	}
	defer s.Close(ctx)
	g, err := ownership.New(cli, ownership.Config{Tenant: "acme", Group: "orders", Partitions: 4})
	if err != nil {
		fmt.Println("config:", err)
		return
	}
	m, err := g.Join(ctx, s, map[string]string{"host": "worker-1"})
	if err != nil {
		fmt.Println("join:", err)
		return
	}
	for range 4 {
		ev := <-m.Events()
		p := ev.Partition
		fmt.Println(ev.Kind, "partition", p.ID(), "token lease", p.Token().Lease())
		go func() {
			<-p.Context().Done() // the partition's work runs until here
			p.Done()             // stopped: release it now
		}()
	}
	snap, err := ownership.GroupGet(ctx, cli, "acme", "orders")
	if err != nil {
		fmt.Println("snapshot:", err)
		return
	}
	fmt.Println("members:", len(snap.Members), "unowned:", snap.Unowned())

	// Leave hands every partition off (revoke, drain, release) and deregisters.
	if err := m.Leave(ctx); err != nil {
		fmt.Println("leave:", err)
	}
	for ev := range m.Events() {
		fmt.Println(ev.Kind, "partition", ev.Partition.ID(), ev.Reason)
	}
	// Unordered output:
	// acquired partition 0 token lease /tenants/acme/elections/ownership.orders.0
	// acquired partition 1 token lease /tenants/acme/elections/ownership.orders.1
	// acquired partition 2 token lease /tenants/acme/elections/ownership.orders.2
	// acquired partition 3 token lease /tenants/acme/elections/ownership.orders.3
	// members: 1 unowned: 0
	// revoked partition 0 leave
	// revoked partition 1 leave
	// revoked partition 2 leave
	// revoked partition 3 leave
}
