package correctnesslease

import (
	"context"
	"testing"
	"time"

	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestObserve(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := Config{Tenant: coordtest.Tenant(t), TTL: testTTL}
	a, b := newSession(t, cli, cfg), newSession(t, cli, cfg)
	ch, err := Observe(ctx, cli, cfg.Tenant, "leader")
	if err != nil {
		t.Fatal(err)
	}
	next := func() Observation {
		t.Helper()
		select {
		case o := <-ch:
			return o
		case <-time.After(10 * time.Second):
			t.Fatal("no observation")
			return Observation{}
		}
	}
	if o := next(); o.Held() {
		t.Fatalf("initial: %+v", o)
	}
	la, err := Acquire(ctx, a, "leader")
	if err != nil {
		t.Fatal(err)
	}
	if o := next(); o.Key != la.Key() || o.TokenRevision != la.Token().Revision() {
		t.Fatalf("after a: %+v", o)
	}
	got := make(chan *Lease, 1)
	go func() {
		lb, err := Acquire(ctx, b, "leader")
		if err != nil {
			t.Error(err)
		}
		got <- lb
	}()
	waitKeys(t, cli, la.Token().Lease()+"/", 2) // a waiter is not a holder change
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lb := coordtest.Recv(t, got, 30*time.Second, "the waiter acquiring after the handoff")
	if o := next(); o.Key != lb.Key() || o.TokenRevision != lb.Token().Revision() {
		t.Fatalf("after handoff: %+v", o)
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if o := next(); o.Held() {
		t.Fatalf("after release: %+v", o)
	}
	cancel()
	for range ch {
	}
}
