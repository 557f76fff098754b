package membership_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestOwnKeyOverwrittenReregistered: someone else's put at the instance key (no
// lease, foreign value) is a loss; the registration puts its own value back.
func TestOwnKeyOverwrittenReregistered(t *testing.T) {
	e := coordtest.Etcd(t)
	cli, op := e.Client(t), e.Client(t)
	r := register(t, cli, membership.Config{Tenant: coordtest.Tenant(t), Service: "api", Instance: "pod-1", Addr: "10.0.0.1:1"})
	before := r.Status()
	if _, err := op.Put(context.Background(), r.Key(), `{"addr":"6.6.6.6:6"}`); err != nil {
		t.Fatal(err)
	}
	coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "re-registration after overwrite", func() bool { return r.Status().Registrations == 2 && r.Registered() })
	st := r.Status()
	if st.LastLoss.Reason != membership.LossKeyOverwritten || st.Lease != before.Lease {
		t.Fatalf("status %+v", st)
	}
	resp, _ := get(t, cli, r.Key())
	if len(resp.Kvs) != 1 || !strings.Contains(string(resp.Kvs[0].Value), "10.0.0.1:1") || clientv3.LeaseID(resp.Kvs[0].Lease) != st.Lease {
		t.Fatalf("key after re-registration: %+v", resp.Kvs)
	}
}

// TestLeaseRevokedReregisteredUnderNewLease: the lease is revoked behind the
// registration's back (etcd deletes the key with it); the registration grants
// a new lease and puts the key under it.
func TestLeaseRevokedReregisteredUnderNewLease(t *testing.T) {
	e := coordtest.Etcd(t)
	cli, op := e.Client(t), e.Client(t)
	r := register(t, cli, membership.Config{Tenant: coordtest.Tenant(t), Service: "api", Instance: "pod-1",
		SessionConfig: membership.SessionConfig{TTL: 3 * time.Second}})
	old := r.Status().Lease
	if _, err := op.Revoke(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "re-registration under a new lease", func() bool {
		st := r.Status()
		return st.Registered && st.Lease != 0 && st.Lease != old
	})
	st := r.Status()
	ttl, err := op.TimeToLive(context.Background(), st.Lease, clientv3.WithAttachedKeys())
	if err != nil || ttl.TTL <= 0 || len(ttl.Keys) != 1 || string(ttl.Keys[0]) != r.Key() {
		t.Fatalf("new lease %x: %+v %v", st.Lease, ttl, err)
	}
	if st.Losses != 1 || (st.LastLoss.Reason != coord.LossSessionExpired && st.LastLoss.Reason != coord.LossKeyDeleted) {
		t.Fatalf("status %+v", st)
	}
}

// TestUpdateWhileLostIsKept: an Update while the key is lost returns
// ErrNotRegistered and the re-registration writes the new metadata. The fake
// clock holds the re-registration back until the test has updated.
func TestUpdateWhileLostIsKept(t *testing.T) {
	e := coordtest.Etcd(t)
	cli, op := e.Client(t), e.Client(t)
	clk := coordtest.NewFakeClock(time.Now())
	r := register(t, cli, membership.Config{Tenant: coordtest.Tenant(t), Service: "api", Instance: "pod-1",
		Metadata: map[string]string{"v": "1"}, SessionConfig: membership.SessionConfig{Clock: clk}})
	ctx := context.Background()
	if err := r.Update(ctx, map[string]string{"v": "2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := op.Delete(ctx, r.Key()); err != nil {
		t.Fatal(err)
	}
	coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "loss noticed", func() bool { return r.Status().Losses == 1 })
	if r.Registered() {
		t.Fatal("Registered while the key is lost")
	}
	if err := r.Update(ctx, map[string]string{"v": "3"}); !errors.Is(err, membership.ErrNotRegistered) {
		t.Fatalf("Update while lost: %v", err)
	}
	if resp, _ := get(t, cli, r.Key()); len(resp.Kvs) != 0 {
		t.Fatal("key back before the backoff elapsed")
	}
	clk.Advance(membership.DefaultBackoffBase)
	coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "re-registration", r.Registered)
	resp, _ := get(t, cli, r.Key())
	var v struct{ Metadata map[string]string }
	if len(resp.Kvs) != 1 || json.Unmarshal(resp.Kvs[0].Value, &v) != nil || v.Metadata["v"] != "3" {
		t.Fatalf("re-registered value %+v", resp.Kvs)
	}
	// Invalid metadata changes nothing.
	if err := r.Update(ctx, map[string]string{"v": "\xff"}); !errors.Is(err, membership.ErrInvalidConfig) {
		t.Fatalf("invalid update: %v", err)
	}
	if err := r.Update(ctx, map[string]string{"v": strings.Repeat("x", 70<<10)}); !errors.Is(err, coord.ErrQuotaExceeded) {
		t.Fatalf("oversized update: %v", err)
	}
	if resp, _ := get(t, cli, r.Key()); !strings.Contains(string(resp.Kvs[0].Value), `"v":"3"`) {
		t.Fatalf("value changed by a refused update: %s", resp.Kvs[0].Value)
	}
}

// TestSessionSharesOneKeepalive: three registrations on one Session send one
// keepalive per TTL/3 between them (counted at the gRPC layer), and
// Session.Register refuses lease settings and a second registration of one key.
func TestSessionSharesOneKeepalive(t *testing.T) {
	e := coordtest.Etcd(t)
	cli, rpcs := coordtest.CountingEtcdClient(t, e.Endpoints...)
	clk := coordtest.NewFakeClock(time.Now())
	m := newMetrics(t)
	ctx := context.Background()
	const ttl = 6 * time.Second
	s, err := membership.NewSession(ctx, cli, membership.SessionConfig{TTL: ttl, Clock: clk, Logger: coordtest.Logger(t), MeterProvider: m})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	tenant := coordtest.Tenant(t)
	var regs []*membership.Registration
	for _, name := range []string{"a", "b", "c"} {
		r, err := s.Register(ctx, membership.Config{Tenant: tenant, Service: "api", Instance: name})
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, r)
	}
	if _, err := s.Register(ctx, membership.Config{Tenant: tenant, Service: "api", Instance: "a"}); !errors.Is(err, membership.ErrInvalidConfig) {
		t.Fatalf("duplicate instance on a session: %v", err)
	}
	if _, err := s.Register(ctx, membership.Config{Tenant: tenant, Service: "api", Instance: "d", SessionConfig: membership.SessionConfig{TTL: ttl}}); !errors.Is(err, membership.ErrInvalidConfig) {
		t.Fatalf("lease settings on a shared session: %v", err)
	}
	const rounds = 6
	for i := 1; i <= rounds; i++ {
		clk.Advance(ttl / 3)
		coordtest.Until(t, 5*time.Second, 5*time.Millisecond, "keepalive answered", func() bool {
			return m.sum("coordkit.membership.keepalives", attribute.String(coord.AttrOutcome, "ok")) == int64(i)
		})
		if got := rpcs.Count("/LeaseKeepAlive"); got != int64(i) {
			t.Fatalf("after %d TTL/3 periods: %d keepalive RPCs", i, got)
		}
	}
	for _, r := range regs {
		if !r.Registered() || r.Status().Lease != s.Lease() {
			t.Fatalf("%s: %+v (session lease %x)", r.Key(), r.Status(), s.Lease())
		}
	}
	t.Logf("%d registrations, %d TTL/3 periods: %d keepalive RPCs", len(regs), rounds, rpcs.Count("/LeaseKeepAlive"))
	// Deregister removes only its own key; Close removes the rest.
	if err := regs[0].Deregister(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := instances(t, cli, tenant, "api"); len(got) != 2 {
		t.Fatalf("after one Deregister: %v", got)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := instances(t, cli, tenant, "api"); len(got) != 0 {
		t.Fatalf("after Close: %v", got)
	}
	if _, err := s.Register(ctx, membership.Config{Tenant: tenant, Service: "api", Instance: "z"}); !errors.Is(err, membership.ErrClosed) {
		t.Fatalf("Register after Close: %v", err)
	}
}

// TestRegisteredTurnsFalseWhenUnconfirmed: while etcd is unreachable for a TTL
// the registration cannot know whether its lease expired: Registered (and the
// gauge) turn false; once keepalives get through again they turn true.
func TestRegisteredTurnsFalseWhenUnconfirmed(t *testing.T) {
	e := coordtest.Etcd(t)
	proxy := coordtest.NewProxy(t, strings.TrimPrefix(e.Endpoints[0], "http://"))
	cli := coordtest.NewEtcdClient(t, proxy.URL())
	clk := coordtest.NewFakeClock(time.Now())
	m := newMetrics(t)
	const ttl = 30 * time.Second // real etcd must not expire the lease during the test
	r := register(t, cli, membership.Config{Tenant: coordtest.Tenant(t), Service: "api", Instance: "pod-1",
		SessionConfig: membership.SessionConfig{TTL: ttl, KeepaliveTimeout: 200 * time.Millisecond, Clock: clk, MeterProvider: m}})
	gauge := func() int64 {
		return m.sum("coordkit.membership.registered", attribute.String("coordkit.membership.instance", "pod-1"))
	}
	if !r.Registered() || gauge() != 1 {
		t.Fatal("not registered at start")
	}
	proxy.Blackhole()
	changed := r.Changed()
	clk.Advance(ttl)
	coordtest.Recv(t, changed, 10*time.Second, "a status change after a TTL without keepalive")
	if r.Registered() || gauge() != 0 {
		t.Fatalf("still registered after a TTL unconfirmed: %+v", r.Status())
	}
	coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "a keepalive swallowed by the blackhole", func() bool { return proxy.Stats().DroppedBytes > 0 })
	proxy.Heal()
	coordtest.Until(t, 20*time.Second, 5*time.Millisecond, "registered again", func() bool {
		clk.Advance(ttl / 6)
		return r.Registered()
	})
	if gauge() != 1 || r.Status().Losses != 0 {
		t.Fatalf("after recovery: gauge %d, %+v", gauge(), r.Status())
	}
}

// TestSessionRegisterAfterUnnoticedLeaseLoss: the session's lease is gone
// (revoked) before its keepalive noticed; a Register on it must wait for the
// new lease and succeed, not hand the session's loss to the caller. Found by
// TestManyRegistrationsOneTenant under COORD_FULL=1 (leases expired under load).
func TestSessionRegisterAfterUnnoticedLeaseLoss(t *testing.T) {
	e := coordtest.Etcd(t)
	cli, op := e.Client(t), e.Client(t)
	clk := coordtest.NewFakeClock(time.Now()) // the keepalive never runs by itself
	ctx := context.Background()
	s, err := membership.NewSession(ctx, cli, membership.SessionConfig{Clock: clk, Logger: coordtest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	old := s.Lease()
	if _, err := op.Revoke(ctx, old); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := s.Register(rctx, membership.Config{Tenant: coordtest.Tenant(t), Service: "api", Instance: "a"})
	if err != nil {
		t.Fatalf("Register on a session whose lease was revoked: %v", err)
	}
	if st := r.Status(); !st.Registered || st.Lease == old || st.Lease != s.Lease() {
		t.Fatalf("status %+v, old lease %x, session lease %x", st, old, s.Lease())
	}
}

// TestSessionCloseDuringRegister: Close while a Register on the session is
// still waiting for etcd (blackholed) ends that Register with ErrClosed and
// returns; it must not wait for a registration loop that never started.
func TestSessionCloseDuringRegister(t *testing.T) {
	e := coordtest.Etcd(t)
	proxy := coordtest.NewProxy(t, strings.TrimPrefix(e.Endpoints[0], "http://"))
	cli := coordtest.NewEtcdClient(t, proxy.URL())
	ctx := context.Background()
	s, err := membership.NewSession(ctx, cli, membership.SessionConfig{Logger: coordtest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	proxy.Blackhole()
	regErr := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		_, err := s.Register(rctx, membership.Config{Tenant: coordtest.Tenant(t), Service: "api", Instance: "a"})
		regErr <- err
	}()
	coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "the put in flight", func() bool { return proxy.Stats().DroppedBytes > 0 })
	closed := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		closed <- s.Close(cctx)
	}()
	coordtest.Recv(t, closed, 10*time.Second, "Close returning while a Register was in flight")
	if err := coordtest.Recv(t, regErr, 10*time.Second, "Register returning after Close"); !errors.Is(err, membership.ErrClosed) {
		t.Fatalf("Register during Close: %v", err)
	}
	proxy.Heal()
}

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
		atEnd(t, r.Deregister)
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
