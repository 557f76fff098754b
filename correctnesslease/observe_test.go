package correctnesslease

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestObserve(t *testing.T) {
	cli, a, b := twoSessions(t)
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := Observe(ctx, cli, a.Tenant(), "leader")
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
	la := mustAcquire(ctx, t, a, "leader")
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

// TestObserveReportsEveryChangeInABatch: Observe promises every change of
// holder. Changes made between its first read and the start of its watch reach
// it in one catch-up watch response; a term that began and ended inside that
// batch must still be reported (holder A, then no holder).
func TestObserveReportsEveryChangeInABatch(t *testing.T) {
	e := coordtest.Etcd(t)
	writer := e.Client(t)
	tenant := coordtest.Tenant(t)
	prefix := "/tenants/" + tenant + "/elections/leader"
	var afterFirstRead atomic.Bool
	changed := make(chan int64, 1)
	inject := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err == nil && method == "/etcdserverpb.KV/Range" && afterFirstRead.CompareAndSwap(false, true) {
			// A whole term between Observe's read and its watch.
			p, perr := writer.Put(context.Background(), prefix+"/a", "")
			if perr != nil {
				t.Error(perr)
			}
			if _, derr := writer.Delete(context.Background(), prefix+"/a"); derr != nil {
				t.Error(derr)
			}
			changed <- p.Header.Revision
		}
		return err
	}
	cli := interceptedClient(t, e, inject)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := Observe(ctx, cli, tenant, "leader")
	if err != nil {
		t.Fatal(err)
	}
	var revA int64
	select {
	case revA = <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("the term was never injected")
	}
	var got []Observation
	timeout := time.After(5 * time.Second)
	for len(got) < 3 {
		select {
		case o := <-ch:
			got = append(got, o)
		case <-timeout:
			t.Fatalf("observations %+v: the term of %s/a (revision %d) was not reported", got, prefix, revA)
		}
	}
	if got[0].Held() || got[1].Key != prefix+"/a" || got[1].TokenRevision != revA || got[2].Held() {
		t.Fatalf("observations %+v, want none, %s/a@%d, none", got, prefix, revA)
	}
}
