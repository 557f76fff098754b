package membership_test

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// An instance registers itself; a consumer watches the service and gets the
// whole set, with its revision, on every change.
func Example() {
	cli, stop := coordtest.ExampleEtcd()
	defer stop()
	ctx := context.Background()

	reg, err := membership.Register(ctx, cli, membership.Config{
		Tenant: "acme", Service: "checkout", Instance: "pod-7",
		Addr:     "10.0.0.7:8080",
		Metadata: map[string]string{"zone": "eu-west-1a"},
	})
	if err != nil {
		fmt.Println("register:", err)
		return
	}
	fmt.Println("registered:", reg.Registered(), reg.Key())

	w, err := membership.Watch(ctx, cli, "acme", "checkout", membership.WatchConfig{})
	if err != nil {
		fmt.Println("watch:", err)
		return
	}
	defer w.Close()
	v := <-w.Updates()
	for _, m := range v.Members {
		fmt.Println("member:", m.Instance, m.Addr, m.Metadata["zone"])
	}

	// Whatever takes the key away — lease expiry, an operator's delete — the
	// registration puts it back. Deregister is the only way out.
	if err := reg.Deregister(ctx); err != nil {
		fmt.Println("deregister:", err)
	}
	v = <-w.Updates()
	fmt.Println("members after deregister:", len(v.Members))
	// Output:
	// registered: true /tenants/acme/members/checkout/pod-7
	// member: pod-7 10.0.0.7:8080 eu-west-1a
	// members after deregister: 0
}

// Many instances in one process share one lease and one keepalive.
func ExampleSession() {
	cli, stop := coordtest.ExampleEtcd()
	defer stop()
	ctx := context.Background()

	s, err := membership.NewSession(ctx, cli, membership.SessionConfig{TTL: 10 * time.Second})
	if err != nil {
		fmt.Println("session:", err)
		return
	}
	defer s.Close(ctx)
	for _, shard := range []string{"shard-0", "shard-1"} {
		if _, err := s.Register(ctx, membership.Config{Tenant: "acme", Service: "indexer", Instance: shard}); err != nil {
			fmt.Println("register:", err)
			return
		}
	}
	resp, err := cli.Get(ctx, "/tenants/acme/members/indexer/", clientv3.WithPrefix())
	if err != nil {
		fmt.Println("get:", err)
		return
	}
	for _, kv := range resp.Kvs {
		fmt.Println(string(kv.Key), kv.Lease == int64(s.Lease()))
	}
	// Output:
	// /tenants/acme/members/indexer/shard-0 true
	// /tenants/acme/members/indexer/shard-1 true
}
