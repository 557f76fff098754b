package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/naming/endpoints"
	etcdresolver "go.etcd.io/etcd/client/v3/naming/resolver"
	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"

	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/membership/grpcresolver"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// These benchmarks compare membership with a bare etcd registration and with
// go.etcd.io/etcd/client/v3/naming (endpoints + resolver), on one embedded
// etcd, interleaved operation by operation so the busy machine affects all
// alike.
//
//	cd bench && go test -run '^$' -bench 'Membership' -benchtime 20x -timeout 30m .

// memberRounds is the number of interleaved rounds per benchmark iteration:
// -benchtime 20x gives 1,000 samples per variant.
const memberRounds = 50

func memberPct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// inTurn runs a then b, or b then a when n is odd: neither always goes first.
func inTurn(n int, a, b func()) {
	if n%2 == 0 {
		a()
		b()
	} else {
		b()
		a()
	}
}

func memberMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkMembershipRegister: membership.Register (a lease of its own, the
// put, the keepalive and own-key watch started) against the bare minimum a
// registration needs, Grant + Put(WithLease). Deregistration is not timed.
func BenchmarkMembershipRegister(b *testing.B) {
	e := coordtest.Etcd(b)
	cli := e.Client(b)
	ctx := context.Background()
	var ours, bare []time.Duration
	n := 0
	for b.Loop() {
		for range memberRounds {
			n++
			key := fmt.Sprintf("/tenants/bench/members/bare/i%d", n)
			val := `{"addr":"10.0.0.1:8080"}`
			timeBare := func() {
				t0 := time.Now()
				g, err := cli.Grant(ctx, 15)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := cli.Put(ctx, key, val, clientv3.WithLease(g.ID)); err != nil {
					b.Fatal(err)
				}
				bare = append(bare, time.Since(t0))
				if _, err := cli.Revoke(ctx, g.ID); err != nil {
					b.Fatal(err)
				}
			}
			timeOurs := func() {
				t0 := time.Now()
				r, err := membership.Register(ctx, cli, membership.Config{Tenant: "bench", Service: "ours", Instance: fmt.Sprintf("i%d", n),
					Addr: "10.0.0.1:8080", SessionConfig: membership.SessionConfig{Logger: leaseQuiet}})
				if err != nil {
					b.Fatal(err)
				}
				ours = append(ours, time.Since(t0))
				if err := r.Deregister(ctx); err != nil {
					b.Fatal(err)
				}
			}
			inTurn(n, timeBare, timeOurs)
		}
	}
	b.ReportMetric(memberMs(memberPct(bare, 50)), "grant+put-p50-ms")
	b.ReportMetric(memberMs(memberPct(ours, 50)), "register-p50-ms")
	b.ReportMetric(float64(memberPct(ours, 50))/float64(memberPct(bare, 50)), "register/grant+put")
	b.ReportMetric(float64(len(ours)), "samples")
}

// recorder is an LB policy that only records the addresses each resolver
// update brings, so a benchmark can time Put → the balancer sees the address.
// Channels are told apart by target.
type recorder struct {
	target string
}

const recorderName = "membership_bench_recorder"

var (
	recorderOnce  sync.Once
	recorderSinks sync.Map // target → *addrSink
)

// addrSink is told each set of addresses a channel's balancer receives.
type addrSink struct {
	mu      sync.Mutex
	current map[string]bool
	wake    chan struct{}
}

func (s *addrSink) set(addrs map[string]bool) {
	s.mu.Lock()
	s.current = addrs
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// wait blocks until the balancer's addresses include (present) or exclude addr.
func (s *addrSink) wait(b *testing.B, addr string, present bool) {
	deadline := time.After(10 * time.Second)
	for {
		s.mu.Lock()
		ok := s.current[addr] == present
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-s.wake:
		case <-deadline:
			b.Fatalf("balancer did not see %s present=%v within 10 s", addr, present)
		}
	}
}

func (recorder) Name() string { return recorderName }

func (recorder) Build(_ balancer.ClientConn, opts balancer.BuildOptions) balancer.Balancer {
	return &recorder{target: opts.Target.String()}
}

func (r *recorder) UpdateClientConnState(s balancer.ClientConnState) error {
	addrs := map[string]bool{}
	for _, ep := range s.ResolverState.Endpoints {
		for _, a := range ep.Addresses {
			addrs[a.Addr] = true
		}
	}
	for _, a := range s.ResolverState.Addresses {
		addrs[a.Addr] = true
	}
	if v, ok := recorderSinks.Load(r.target); ok {
		v.(*addrSink).set(addrs)
	}
	return nil
}

func (*recorder) ResolverError(error)                                        {}
func (*recorder) UpdateSubConnState(balancer.SubConn, balancer.SubConnState) {}
func (*recorder) Close()                                                     {}
func (*recorder) ExitIdle()                                                  {}

// recordedChannel dials target with the recorder policy and returns its sink.
func recordedChannel(b *testing.B, target string, rb resolver.Builder) *addrSink {
	recorderOnce.Do(func() { balancer.Register(recorder{}) })
	sink := &addrSink{current: map[string]bool{}, wake: make(chan struct{}, 1)}
	recorderSinks.Store(target, sink)
	cc, err := grpc.NewClient(target, grpc.WithResolvers(rb), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"`+recorderName+`":{}}]}`))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close(); recorderSinks.Delete(target) })
	cc.Connect()
	return sink
}

// BenchmarkMembershipResolverUpdate: time from a Put of a new instance's key
// (under a lease granted beforehand) to the gRPC balancer of a real channel
// seeing its address, for grpcresolver and for etcd's naming resolver with
// its endpoints manager, interleaved. Each instance is removed again (untimed,
// until the balancer has seen the removal) so every sample is one update.
func BenchmarkMembershipResolverUpdate(b *testing.B) {
	e := coordtest.Etcd(b)
	cli := e.Client(b)
	ctx := context.Background()
	g, err := cli.Grant(ctx, 60)
	if err != nil {
		b.Fatal(err)
	}
	ourBuilder, err := grpcresolver.NewBuilder(cli, grpcresolver.Config{Logger: leaseQuiet})
	if err != nil {
		b.Fatal(err)
	}
	etcdBuilder, err := etcdresolver.NewBuilder(cli)
	if err != nil {
		b.Fatal(err)
	}
	ourSink := recordedChannel(b, "coord:///bench/api", ourBuilder)
	etcdSink := recordedChannel(b, "etcd:///bench-etcd/api", etcdBuilder)
	em, err := endpoints.NewManager(cli, "bench-etcd/api")
	if err != nil {
		b.Fatal(err)
	}
	var ours, peer []time.Duration
	n := 0
	for b.Loop() {
		for range memberRounds {
			n++
			addr := fmt.Sprintf("10.%d.%d.%d:80", n>>16&255, n>>8&255, n&255)
			timeOurs := func() {
				key := fmt.Sprintf("/tenants/bench/members/api/i%d", n)
				val, _ := json.Marshal(map[string]string{"addr": addr})
				t0 := time.Now()
				if _, err := cli.Put(ctx, key, string(val), clientv3.WithLease(g.ID)); err != nil {
					b.Fatal(err)
				}
				ourSink.wait(b, addr, true)
				ours = append(ours, time.Since(t0))
				if _, err := cli.Delete(ctx, key); err != nil {
					b.Fatal(err)
				}
				ourSink.wait(b, addr, false)
			}
			timePeer := func() {
				key := fmt.Sprintf("bench-etcd/api/i%d", n)
				t0 := time.Now()
				if err := em.AddEndpoint(ctx, key, endpoints.Endpoint{Addr: addr}, clientv3.WithLease(g.ID)); err != nil {
					b.Fatal(err)
				}
				etcdSink.wait(b, addr, true)
				peer = append(peer, time.Since(t0))
				if err := em.DeleteEndpoint(ctx, key); err != nil {
					b.Fatal(err)
				}
				etcdSink.wait(b, addr, false)
			}
			inTurn(n, timeOurs, timePeer)
		}
	}
	b.ReportMetric(memberMs(memberPct(ours, 50)), "coord-p50-ms")
	b.ReportMetric(memberMs(memberPct(ours, 99)), "coord-p99-ms")
	b.ReportMetric(memberMs(memberPct(peer, 50)), "etcdnaming-p50-ms")
	b.ReportMetric(memberMs(memberPct(peer, 99)), "etcdnaming-p99-ms")
	b.ReportMetric(float64(memberPct(ours, 50))/float64(memberPct(peer, 50)), "coord/etcdnaming-p50")
	b.ReportMetric(float64(memberPct(ours, 99))/float64(memberPct(peer, 99)), "coord/etcdnaming-p99")
	b.ReportMetric(float64(len(ours)), "samples")
}
