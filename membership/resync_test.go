package membership_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestOwnKeyResyncAfterCompaction: three registrations on one session follow
// their keys through the session's watch plane. While its connection is
// blackholed, pod-2's key is deleted, pod-3's is rewritten under the session's
// own lease (same create revision and lease, another write), pod-1's is left
// alone, and etcd's history is compacted past them. After the connection is
// cut and healed the plane can only resync (a read of each key's state): pod-2
// must see its key gone, pod-3 its key rewritten, and pod-1 nothing — a resync
// that finds the key as this registration wrote it is not a loss.
func TestOwnKeyResyncAfterCompaction(t *testing.T) {
	e := coordtest.Etcd(t)
	op := e.Client(t)
	proxy := coordtest.NewProxy(t, strings.TrimPrefix(e.Endpoints[0], "http://"))
	s := sharedSession(t, coordtest.NewEtcdClient(t, proxy.URL()), membership.SessionConfig{TTL: 30 * time.Second})
	tenant := coordtest.Tenant(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	regs := map[string]*membership.Registration{}
	for _, inst := range []string{"pod-1", "pod-2", "pod-3"} {
		r, err := s.Register(ctx, membership.Config{Tenant: tenant, Service: "api", Instance: inst})
		if err != nil {
			t.Fatalf("Register %s: %v", inst, err)
		}
		t.Cleanup(func() { _ = r.Deregister(context.Background()) })
		regs[inst] = r
	}
	proxy.Blackhole()
	if _, err := op.Delete(ctx, regs["pod-2"].Key()); err != nil {
		t.Fatal(err)
	}
	if _, err := op.Put(ctx, regs["pod-3"].Key(), `{"addr":"10.0.0.9:80"}`, clientv3.WithLease(s.Lease())); err != nil {
		t.Fatal(err)
	}
	resp, err := op.Put(ctx, "/tenants/"+tenant+"/members/other/x", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	proxy.Heal()
	proxy.Cut()
	for inst, want := range map[string]coord.LossReason{"pod-2": coord.LossKeyDeleted, "pod-3": membership.LossKeyOverwritten} {
		r := regs[inst]
		coordtest.Until(t, 5*time.Second, 5*time.Millisecond, inst+"'s loss seen by the resync and re-registered", func() bool {
			st := r.Status()
			return st.Losses == 1 && st.Registrations == 2 && st.Registered
		})
		if got := r.Status().LastLoss.Reason; got != want {
			t.Fatalf("%s lost its key with reason %q, want %q", inst, got, want)
		}
	}
	// pod-1's resync came with the others'; give a spurious loss time to show.
	time.Sleep(200 * time.Millisecond)
	if st := regs["pod-1"].Status(); st.Losses != 0 || st.Registrations != 1 {
		t.Fatalf("pod-1, untouched, counts %d losses and %d registrations after the resync (last loss %+v)", st.Losses, st.Registrations, st.LastLoss)
	}
}
