package bench

import (
	"bufio"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// These benchmarks compare package ownership with partition ownership
// hand-rolled on go.etcd.io/etcd/client/v3/concurrency (a member key, a watch,
// rendezvous hashing and one concurrency.Mutex per partition: handRolled), on
// one embedded etcd, in the same run:
//
//	cd bench && go test -run '^$' -bench 'Ownership' -benchtime 3x -timeout 30m .
//
// OwnershipRebalance: P = 1,000 partitions, members joining one by one from 2
// to 10 and leaving one by one back to 2; each step is timed from the Join (or
// Leave) to the last change of the partition → holder map (settled: every
// partition held by a live member, every member holding some, nothing changed
// for 300 ms), and each partition that moved is a planned handoff (release at
// the old owner → acquire at the new one). OwnershipTakeover: a member process
// holding half of 100 partitions is SIGSTOPped; time until the other member
// holds them all, against the TTL. OwnershipRPCs: etcd RPCs per second per
// member in steady state (10 members, 1,000 partitions, counted by a gRPC
// interceptor on each member's own client: unary calls and stream messages
// sent).

const (
	ownBenchPartitions = 1000
	ownBenchQuiet      = 300 * time.Millisecond
)

// ownBenchMember is one member of either variant.
type ownBenchMember struct {
	name string
	ours *ownership.Member
	sess *correctnesslease.Session
	stop chan struct{}
	done chan struct{}
	peer *handRolled
}

// joinOurs joins the group with a session of its own and reports its events to obs.
func joinOurs(ctx context.Context, cli *clientv3.Client, group, name string, partitions int, ttl time.Duration, obs *ownObserver) (*ownBenchMember, error) {
	s, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: "bench", TTL: ttl, Logger: leaseQuiet})
	if err != nil {
		return nil, err
	}
	g, err := ownership.New(cli, ownership.Config{Tenant: "bench", Group: group, Partitions: partitions, Logger: leaseQuiet})
	if err != nil {
		return nil, err
	}
	m, err := g.Join(ctx, s, nil)
	if err != nil {
		return nil, err
	}
	bm := &ownBenchMember{name: m.ID(), ours: m, sess: s, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(bm.done)
		for {
			select {
			case <-bm.stop:
				return
			case ev, ok := <-m.Events():
				if !ok {
					return
				}
				if ev.Kind == ownership.Acquired {
					obs.acquired(ev.Partition.ID(), bm.name)
				} else {
					obs.released(ev.Partition.ID(), bm.name, true)
					ev.Partition.Done()
				}
			}
		}
	}()
	return bm, nil
}

// leave hands every partition off and stops the member.
func (m *ownBenchMember) leave(ctx context.Context) error {
	if m.peer != nil {
		m.peer.leave(ctx)
		return nil
	}
	err := m.ours.Leave(ctx)
	close(m.stop)
	<-m.done
	_ = m.sess.Close(ctx)
	return err
}

// BenchmarkOwnershipRebalance: see the file comment. Each iteration runs the
// whole 2 → 10 → 2 cycle once per variant (ownership first on odd iterations).
func BenchmarkOwnershipRebalance(b *testing.B) {
	e := coordtest.Etcd(b)
	ctx := context.Background()
	type variantResult struct {
		join, leave, handoffs, joinHandoffs, leaveHandoffs []time.Duration
	}
	results := map[string]*variantResult{"ownership": {}, "mutex": {}}
	n := 0
	cycle := func(variant string) {
		n++
		group := fmt.Sprintf("rebalance%d", n)
		prefix := "/tenants/bench/handrolled/" + group
		obs := newOwnObserver()
		r := results[variant]
		var members []*ownBenchMember
		live := map[string]bool{}
		join := func(i int) {
			cli := e.Client(b)
			name := fmt.Sprintf("m%d", i)
			t0 := time.Now()
			var m *ownBenchMember
			var err error
			if variant == "ownership" {
				m, err = joinOurs(ctx, cli, group, name, ownBenchPartitions, 15*time.Second, obs)
			} else {
				var h *handRolled
				if h, err = joinHandRolled(cli, prefix, name, ownBenchPartitions, 15, obs); err == nil {
					m = &ownBenchMember{name: name, peer: h}
				}
			}
			if err != nil {
				b.Fatalf("%s: join %s: %v", variant, name, err)
			}
			members = append(members, m)
			live[m.name] = true
			last, err := obs.settle(live, ownBenchPartitions, ownBenchQuiet, 60*time.Second)
			if err != nil {
				b.Fatalf("%s: after join of %s: %v", variant, name, err)
			}
			if len(members) > 2 {
				r.join = append(r.join, last.Sub(t0))
			}
		}
		join(0)
		join(1)
		obs.takeHandoffs() // 1 → 2 is not part of the 2 → 10 → 2 cycle
		for i := 2; i < 10; i++ {
			join(i)
		}
		r.joinHandoffs = append(r.joinHandoffs, obs.takeHandoffs()...)
		for len(members) > 2 {
			m := members[len(members)-1]
			members = members[:len(members)-1]
			delete(live, m.name)
			t0 := time.Now()
			if err := m.leave(ctx); err != nil {
				b.Fatalf("%s: leave: %v", variant, err)
			}
			last, err := obs.settle(live, ownBenchPartitions, ownBenchQuiet, 60*time.Second)
			if err != nil {
				b.Fatalf("%s: after a leave: %v", variant, err)
			}
			r.leave = append(r.leave, last.Sub(t0))
		}
		r.leaveHandoffs = append(r.leaveHandoffs, obs.takeHandoffs()...)
		for _, m := range members {
			_ = m.leave(ctx)
		}
	}
	for b.Loop() {
		if n%4 == 0 {
			cycle("ownership")
			cycle("mutex")
		} else {
			cycle("mutex")
			cycle("ownership")
		}
	}
	o, p := results["ownership"], results["mutex"]
	for _, r := range results {
		r.handoffs = append(slices.Clone(r.joinHandoffs), r.leaveHandoffs...)
	}
	b.ReportMetric(memberMs(memberPct(o.join, 50)), "ownership-join-p50-ms")
	b.ReportMetric(memberMs(memberPct(p.join, 50)), "mutex-join-p50-ms")
	b.ReportMetric(memberMs(memberPct(o.leave, 50)), "ownership-leave-p50-ms")
	b.ReportMetric(memberMs(memberPct(p.leave, 50)), "mutex-leave-p50-ms")
	b.ReportMetric(memberMs(memberPct(o.handoffs, 50)), "ownership-handoff-p50-ms")
	b.ReportMetric(memberMs(memberPct(o.handoffs, 99)), "ownership-handoff-p99-ms")
	b.ReportMetric(memberMs(memberPct(o.joinHandoffs, 99)), "ownership-join-handoff-p99-ms")
	b.ReportMetric(memberMs(memberPct(o.leaveHandoffs, 99)), "ownership-leave-handoff-p99-ms")
	b.ReportMetric(memberMs(memberPct(p.joinHandoffs, 99)), "mutex-join-handoff-p99-ms")
	b.ReportMetric(memberMs(memberPct(p.leaveHandoffs, 99)), "mutex-leave-handoff-p99-ms")
	b.ReportMetric(memberMs(memberPct(p.handoffs, 50)), "mutex-handoff-p50-ms")
	b.ReportMetric(memberMs(memberPct(p.handoffs, 99)), "mutex-handoff-p99-ms")
	b.ReportMetric(float64(memberPct(o.join, 50))/float64(memberPct(p.join, 50)), "ownership/mutex-join")
	b.ReportMetric(float64(memberPct(o.leave, 50))/float64(memberPct(p.leave, 50)), "ownership/mutex-leave")
	b.ReportMetric(float64(memberPct(o.handoffs, 99))/float64(memberPct(p.handoffs, 99)), "ownership/mutex-handoff-p99")
	b.ReportMetric(float64(len(o.handoffs)), "ownership-handoffs")
	b.ReportMetric(float64(len(p.handoffs)), "mutex-handoffs")
}

// ownChildEnv carries "endpoint|variant|group|partitions|ttlSeconds" to the member child.
const ownChildEnv = "COORDKIT_BENCH_OWNERSHIP_MEMBER"

// ownTakeoverChild joins the group named in spec, prints "HELD <n>" once it has
// held the same partitions for 300 ms, and waits to be frozen and killed.
func ownTakeoverChild(spec string) error {
	parts := strings.Split(spec, "|")
	endpoint, variant, group := parts[0], parts[1], parts[2]
	var partitions, ttl int
	fmt.Sscan(parts[3], &partitions)
	fmt.Sscan(parts[4], &ttl)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	obs := newOwnObserver()
	if variant == "ownership" {
		_, err = joinOurs(context.Background(), cli, group, "child", partitions, time.Duration(ttl)*time.Second, obs)
	} else {
		_, err = joinHandRolled(cli, "/tenants/bench/handrolled/"+group, "child", partitions, ttl, obs)
	}
	if err != nil {
		return err
	}
	for {
		time.Sleep(50 * time.Millisecond)
		obs.mu.Lock()
		n, last := len(obs.holder), obs.last
		obs.mu.Unlock()
		if n > 0 && time.Since(last) > ownBenchQuiet {
			fmt.Println("HELD", n)
			select {}
		}
	}
}

// BenchmarkOwnershipTakeover: see the file comment. One trial per variant per
// iteration (TTL 3 s).
func BenchmarkOwnershipTakeover(b *testing.B) {
	const ttl, partitions = 3, 100
	e := coordtest.Etcd(b)
	ctx := context.Background()
	n := 0
	trial := func(variant string) time.Duration {
		n++
		group := fmt.Sprintf("takeover%d", n)
		obs := newOwnObserver()
		cli := e.Client(b)
		var me *ownBenchMember
		if variant == "ownership" {
			m, err := joinOurs(ctx, cli, group, "parent", partitions, ttl*time.Second, obs)
			if err != nil {
				b.Fatal(err)
			}
			me = m
		} else {
			h, err := joinHandRolled(cli, "/tenants/bench/handrolled/"+group, "parent", partitions, ttl, obs)
			if err != nil {
				b.Fatal(err)
			}
			me = &ownBenchMember{name: "parent", peer: h}
		}
		defer func() { _ = me.leave(ctx) }()
		cmd, out := startChild(b, fmt.Sprintf("%s=%s|%s|%s|%d|%d", ownChildEnv, e.Endpoints[0], variant, group, partitions, ttl))
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HELD ") {
			b.Fatalf("%s child: %q %v", variant, line, err)
		}
		obs.mu.Lock()
		held := len(obs.holder)
		obs.mu.Unlock()
		if held == partitions {
			b.Fatalf("%s: the parent still holds every partition: the child took none", variant)
		}
		if err := syscall.Kill(cmd.Process.Pid, syscall.SIGSTOP); err != nil {
			b.Fatal(err)
		}
		frozen := time.Now()
		last, err := obs.settle(map[string]bool{me.name: true}, partitions, 0, 30*time.Second)
		if err != nil {
			b.Fatalf("%s: after the SIGSTOP: %v", variant, err)
		}
		return last.Sub(frozen)
	}
	var ours, peer []time.Duration
	for b.Loop() {
		if n%4 == 0 {
			ours = append(ours, trial("ownership"))
			peer = append(peer, trial("mutex"))
		} else {
			peer = append(peer, trial("mutex"))
			ours = append(ours, trial("ownership"))
		}
	}
	b.ReportMetric(memberMs(memberPct(ours, 50))/1000, "ownership-takeover-p50-s")
	b.ReportMetric(memberMs(memberPct(peer, 50))/1000, "mutex-takeover-p50-s")
	b.ReportMetric(float64(memberPct(ours, 50))/float64(ttl*time.Second), "ownership-takeover/TTL")
	b.ReportMetric(float64(memberPct(peer, 50))/float64(ttl*time.Second), "mutex-takeover/TTL")
	b.Logf("takeover after SIGSTOP, TTL %ds, %d partitions: ownership %v, mutex %v", ttl, partitions, ours, peer)
}

// rpcCounter counts the RPCs a client sends: unary calls and stream messages.
type rpcCounter struct{ n atomic.Int64 }

func (c *rpcCounter) options() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			c.n.Add(1)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, err
			}
			return &countedStream{ClientStream: s, c: c}, nil
		}),
	}
}

type countedStream struct {
	grpc.ClientStream
	c *rpcCounter
}

func (s *countedStream) SendMsg(m any) error {
	s.c.n.Add(1)
	return s.ClientStream.SendMsg(m)
}

// BenchmarkOwnershipRPCs: see the file comment. Both variants run at once (10
// members each, TTL 6 s: a keepalive every 2 s); each iteration counts 12 s.
func BenchmarkOwnershipRPCs(b *testing.B) {
	const members, ttl = 10, 6
	const window = 2 * ttl * time.Second
	e := coordtest.Etcd(b)
	ctx := context.Background()
	counters := map[string][]*rpcCounter{}
	var all []*ownBenchMember
	for _, variant := range []string{"ownership", "mutex"} {
		obs := newOwnObserver()
		live := map[string]bool{}
		for i := range members {
			c := &rpcCounter{}
			cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop(), DialOptions: c.options()})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { cli.Close() })
			name := fmt.Sprintf("m%d", i)
			var m *ownBenchMember
			if variant == "ownership" {
				m, err = joinOurs(ctx, cli, "rpcs", name, ownBenchPartitions, ttl*time.Second, obs)
			} else {
				var h *handRolled
				if h, err = joinHandRolled(cli, "/tenants/bench/handrolled/rpcs", name, ownBenchPartitions, ttl, obs); err == nil {
					m = &ownBenchMember{name: name, peer: h}
				}
			}
			if err != nil {
				b.Fatal(err)
			}
			all = append(all, m)
			live[m.name] = true
			counters[variant] = append(counters[variant], c)
		}
		if _, err := obs.settle(live, ownBenchPartitions, time.Second, 120*time.Second); err != nil {
			b.Fatalf("%s: %v", variant, err)
		}
	}
	b.Cleanup(func() {
		var wg sync.WaitGroup
		for _, m := range all {
			wg.Go(func() { _ = m.leave(ctx) })
		}
		wg.Wait()
	})
	rates := map[string][]float64{}
	for b.Loop() {
		before := map[string]int64{}
		for v, cs := range counters {
			for _, c := range cs {
				before[v] += c.n.Load()
			}
		}
		time.Sleep(window)
		for v, cs := range counters {
			var after int64
			for _, c := range cs {
				after += c.n.Load()
			}
			rates[v] = append(rates[v], float64(after-before[v])/window.Seconds()/members)
		}
	}
	o, p := leaseMedian(rates["ownership"]), leaseMedian(rates["mutex"])
	b.ReportMetric(o, "ownership-rpcs/s/member")
	b.ReportMetric(p, "mutex-rpcs/s/member")
	b.ReportMetric(o/p, "ownership/mutex")
}
