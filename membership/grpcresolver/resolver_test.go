package grpcresolver_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"

	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/membership/grpcresolver"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server starts a real gRPC server (the health service) on loopback.
func server(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, health.NewServer())
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}

func register(t *testing.T, cli *clientv3.Client, tenant, instance, addr string, md map[string]string) *membership.Registration {
	t.Helper()
	r, err := membership.Register(context.Background(), cli, membership.Config{Tenant: tenant, Service: "api", Instance: instance, Addr: addr, Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Deregister(context.Background()) })
	return r
}

// peers makes calls RPCs on cc and returns the addresses that served them.
func peers(t *testing.T, cc *grpc.ClientConn, calls int) map[string]int {
	t.Helper()
	out := map[string]int{}
	for range calls {
		var p peer.Peer
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p), grpc.WaitForReady(true))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		out[p.Addr.String()]++
	}
	return out
}

// TestChannelFollowsRegistrations: a real gRPC channel dialled as
// coord:///{tenant}/api spreads calls over the registered servers and follows
// registrations and deregistrations.
func TestChannelFollowsRegistrations(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	tenant := "t-channel"
	a, b := server(t), server(t)
	register(t, cli, tenant, "a", a, nil)
	rb := register(t, cli, tenant, "b", b, nil)
	builder, err := grpcresolver.NewBuilder(cli, grpcresolver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("coord:///"+tenant+"/api", grpc.WithResolvers(builder),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for got := peers(t, cc, 10); got[a] == 0 || got[b] == 0; got = peers(t, cc, 10) {
		if time.Now().After(deadline) {
			t.Fatalf("calls never reached both servers: %v", got)
		}
	}
	if err := rb.Deregister(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := server(t)
	register(t, cli, tenant, "c", c, nil)
	deadline = time.Now().Add(10 * time.Second)
	for got := peers(t, cc, 10); got[b] != 0 || got[a] == 0 || got[c] == 0; got = peers(t, cc, 10) {
		if time.Now().After(deadline) {
			t.Fatalf("after b left and c joined, calls went to %v (a %s, b %s, c %s)", got, a, b, c)
		}
	}
}

// recordingCC is the resolver.ClientConn of a channel, recording states.
type recordingCC struct {
	resolver.ClientConn
	mu     sync.Mutex
	states []resolver.State
	wake   chan struct{}
}

func newRecordingCC() *recordingCC { return &recordingCC{wake: make(chan struct{}, 1)} }

func (c *recordingCC) UpdateState(s resolver.State) error {
	c.mu.Lock()
	c.states = append(c.states, s)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

func (c *recordingCC) ReportError(error) {}

func (c *recordingCC) ParseServiceConfig(string) *serviceconfig.ParseResult { return nil }

func (c *recordingCC) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.states)
}

func (c *recordingCC) last() resolver.State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.states[len(c.states)-1]
}

// waitState waits for a state satisfying cond.
func (c *recordingCC) waitState(t *testing.T, what string, cond func(resolver.State) bool) resolver.State {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if c.count() > 0 && cond(c.last()) {
			return c.last()
		}
		select {
		case <-c.wake:
		case <-deadline:
			t.Fatalf("%s: not within 10 s (%d states)", what, c.count())
		}
	}
}

func build(t *testing.T, cli *clientv3.Client, target string, cc resolver.ClientConn) resolver.Resolver {
	t.Helper()
	b, err := grpcresolver.NewBuilder(cli, grpcresolver.Config{MinRefreshInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Build(resolver.Target{URL: *mustParse(t, target)}, cc, resolver.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// TestMetadataAsAttributes: each endpoint carries its member (instance and
// metadata) in its attributes; members without an address are skipped.
func TestMetadataAsAttributes(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	tenant := "t-attrs"
	register(t, cli, tenant, "a", "10.0.0.1:80", map[string]string{"zone": "eu-1", "weight": "3"})
	register(t, cli, tenant, "noaddr", "", map[string]string{"role": "worker"})
	cc := newRecordingCC()
	build(t, cli, "coord:///"+tenant+"/api", cc)
	s := cc.waitState(t, "first state", func(s resolver.State) bool { return len(s.Endpoints) == 1 })
	ep := s.Endpoints[0]
	m, ok := grpcresolver.Member(ep)
	if len(ep.Addresses) != 1 || ep.Addresses[0].Addr != "10.0.0.1:80" || !ok || m.Instance != "a" || m.Metadata["zone"] != "eu-1" || m.Metadata["weight"] != "3" {
		t.Fatalf("endpoint %+v, member %+v", ep, m)
	}
	if len(s.Addresses) != 1 || s.Addresses[0].Addr != "10.0.0.1:80" {
		t.Fatalf("addresses %+v", s.Addresses)
	}
	if rev, ok := grpcresolver.Revision(s); !ok || rev <= 0 {
		t.Fatalf("state revision %d %v", rev, ok)
	}
}

// TestResolveNowRereads: ResolveNow re-reads the service from etcd — the state
// it produces comes from a list at a revision past an unrelated write made
// after the last change of the service.
func TestResolveNowRereads(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	tenant := "t-resolvenow"
	register(t, cli, tenant, "a", "10.0.0.1:80", nil)
	cc := newRecordingCC()
	r := build(t, cli, "coord:///"+tenant+"/api", cc)
	first := cc.waitState(t, "first state", func(s resolver.State) bool { return len(s.Addresses) == 1 })
	rev0, _ := grpcresolver.Revision(first)
	pr, err := cli.Put(context.Background(), "/elsewhere", "x")
	if err != nil {
		t.Fatal(err)
	}
	if pr.Header.Revision <= rev0 {
		t.Fatal("unrelated write did not advance the revision")
	}
	// gRPC calls ResolveNow again after each failed connection attempt; a
	// re-read that outran its ReadTimeout on a loaded machine (2 s) keeps the
	// last addresses and waits for the next call. So does this test: every 3 s.
	current := func(s resolver.State) bool { rev, _ := grpcresolver.Revision(s); return rev >= pr.Header.Revision }
	calls, called := 0, time.Time{}
	coordtest.Until(t, 30*time.Second, 50*time.Millisecond, "a state at or after the write elsewhere, after ResolveNow", func() bool {
		if calls > 0 && current(cc.last()) {
			return true
		}
		if time.Since(called) >= 3*time.Second {
			calls, called = calls+1, time.Now()
			r.ResolveNow(resolver.ResolveNowOptions{})
		}
		return false
	})
	t.Logf("ResolveNow called %d times", calls)
	s := cc.last()
	if len(s.Addresses) != 1 || s.Addresses[0].Addr != "10.0.0.1:80" {
		t.Fatalf("state after ResolveNow: %+v", s)
	}
}

// TestKeepsAddressesWhileEtcdUnreachable: fail static — a blackholed etcd never
// empties the channel's addresses.
func TestKeepsAddressesWhileEtcdUnreachable(t *testing.T) {
	e := coordtest.Etcd(t)
	cli := e.Client(t)
	tenant := "t-failstatic"
	register(t, cli, tenant, "a", "10.0.0.1:80", nil)
	proxy := coordtest.NewProxy(t, strings.TrimPrefix(e.Endpoints[0], "http://"))
	rcli := coordtest.NewEtcdClient(t, proxy.URL())
	cc := newRecordingCC()
	r := build(t, rcli, "coord:///"+tenant+"/api", cc)
	cc.waitState(t, "first state", func(s resolver.State) bool { return len(s.Addresses) == 1 })
	n := cc.count()
	proxy.Blackhole()
	for range 5 {
		r.ResolveNow(resolver.ResolveNowOptions{})
		time.Sleep(300 * time.Millisecond)
	}
	if st := proxy.Stats(); st.DroppedBytes == 0 {
		t.Fatalf("blackhole dropped nothing: %+v", st)
	}
	if cc.count() != n || len(cc.last().Addresses) != 1 {
		t.Fatalf("states changed while etcd was unreachable: %d → %d, last %+v", n, cc.count(), cc.last())
	}
	proxy.Heal()
}

func TestBadTargets(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	b, err := grpcresolver.NewBuilder(cli, grpcresolver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"coord:///only-tenant", "coord:///t/a/b", "coord:///t%2Fx/api", "coord:///t/bad%00name", "coord:///t/bad%FFname"} {
		r, err := b.Build(resolver.Target{URL: *mustParse(t, target)}, newRecordingCC(), resolver.BuildOptions{})
		if err == nil {
			r.Close()
		}
		if !errorsIsInvalid(err) {
			t.Errorf("Build(%q): %v, want ErrInvalidConfig", target, err)
		}
	}
	if _, err := grpcresolver.NewBuilder(nil, grpcresolver.Config{}); !errorsIsInvalid(err) {
		t.Errorf("nil client: %v", err)
	}
}
