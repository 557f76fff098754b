package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/reliability/internal/fleethash"
)

// ours is the mix written with coordkit, default configs, one client passed
// everywhere.
type ours struct {
	reader *sdkmetric.ManualReader
	regs   []*membership.Registration
	mu     sync.Mutex
	leases []*correctnesslease.Lease // of the current session
	member *ownership.Member
	losses int
	last   [5]int64 // opens, relists, resyncs, upstream, subscriptions
}

func startOurs(ctx context.Context, cli *clientv3.Client, m mix, lg *obsLog) (*ours, error) {
	w := &ours{reader: sdkmetric.NewManualReader()}
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(w.reader)))
	go w.sample(ctx, lg)

	if m.regs > 0 {
		ms, err := membership.NewSession(ctx, cli, membership.SessionConfig{TTL: m.ttl})
		if err != nil {
			return nil, fmt.Errorf("membership session: %w", err)
		}
		for i := range m.regs {
			r, err := ms.Register(ctx, membership.Config{Tenant: m.tenant, Service: "api",
				Instance: m.name + "-" + strconv.Itoa(i), Addr: m.addr(i)})
			if err != nil {
				return nil, fmt.Errorf("register: %w", err)
			}
			w.regs = append(w.regs, r)
		}
	}
	// The caches start together, as a process's libraries do at init: their
	// first reads share the plane's probes.
	if err := startTogether(m.caches, func(i int) error { return startCache(ctx, cli, m, i, lg) }); err != nil {
		return nil, err
	}
	for i := range m.watchers {
		sub := "w" + strconv.Itoa(i)
		wt, err := membership.Watch(ctx, cli, m.tenant, "api", membership.WatchConfig{})
		if err != nil {
			return nil, fmt.Errorf("membership watch: %w", err)
		}
		lg.line("R", sub, "prefix", fmt.Sprintf("/tenants/%s/members/api/", m.tenant))
		go func() {
			for v := range wt.Updates() {
				members := map[string]string{}
				for _, mb := range v.Members {
					members[mb.Instance] = mb.Addr
				}
				lg.state(sub, v.Revision, fleethash.State(members), nil)
			}
		}()
	}
	if m.leases > 0 || m.partition > 0 {
		if err := firstRound(func(first chan<- error) { w.hold(ctx, cli, m, lg, first) }); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// hold keeps the leases and the ownership member: a session, every lease
// acquired on it, the member joined on it; when the session is lost (a cut
// longer than the step-down deadline) it logs the loss and starts again, as a
// service's main loop does. The first round's outcome goes to first.
func (w *ours) hold(ctx context.Context, cli *clientv3.Client, m mix, lg *obsLog, first chan<- error) {
	var g *ownership.Group
	if m.partition > 0 {
		var err error
		if g, err = ownership.New(cli, ownership.Config{Tenant: m.tenant, Group: "fleet", Partitions: m.partition}); err != nil {
			first <- fmt.Errorf("ownership: %w", err)
			return
		}
	}
	for round := 0; ctx.Err() == nil; round++ {
		s, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: m.tenant, TTL: m.ttl})
		var leases []*correctnesslease.Lease
		var member *ownership.Member
		for i := 0; err == nil && i < m.leases; i++ {
			var l *correctnesslease.Lease
			if l, err = correctnesslease.Acquire(ctx, s, m.name+"-l"+strconv.Itoa(i)); err == nil {
				leases = append(leases, l)
			}
		}
		if err == nil && g != nil {
			member, err = g.Join(ctx, s, nil)
		}
		if err != nil {
			if !retryRound(round, err, first, lg, func() {
				if s != nil {
					w.closeSession(s, nil)
				}
			}) {
				return
			}
			continue
		}
		w.mu.Lock()
		w.leases, w.member = leases, member
		w.mu.Unlock()
		heldRound(round, first, lg)
		select {
		case <-ctx.Done():
			return
		case <-s.Done():
		}
		w.mu.Lock()
		w.losses++
		w.mu.Unlock()
		lg.line("L", time.Now().UnixNano(), "lost")
		w.closeSession(s, member)
	}
}

func (w *ours) closeSession(s *correctnesslease.Session, m *ownership.Member) {
	if m != nil {
		_ = m.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.Close(ctx)
}

// startCache starts cache i and logs what it is given.
func startCache(ctx context.Context, cli *clientv3.Client, m mix, i int, lg *obsLog) error {
	key, sub := m.cacheKey(i), "c"+strconv.Itoa(i)
	// A fleet starting at once on a small machine (the full tier: 25 processes
	// × 380 caches on 2 cores, load average ~100) waits longer than the 5 s
	// default for its first reads; the scenario measures the storm, not start-up.
	c, err := failstatic.New(ctx, cli, failstatic.Config[int64]{Key: key, InitialTimeout: time.Minute,
		Decode: func(kvs []failstatic.KV) (int64, error) {
			if len(kvs) == 0 {
				return 0, nil
			}
			return kvs[0].ModRevision, nil
		}})
	if err != nil {
		return fmt.Errorf("cache %s: %w", key, err)
	}
	lg.line("R", sub, "key", key)
	c.Subscribe(func(s failstatic.Snapshot[int64], changes []failstatic.Change) {
		var chs []string
		for _, ch := range changes {
			chs = append(chs, change(ch.Key, ch.ModRevision, ch.Deleted))
		}
		lg.state(sub, s.Revision, strconv.FormatInt(s.Value, 10), chs)
	})
	s := c.Get()
	lg.line("S", sub, time.Now().UnixNano(), s.Revision, s.Value, "init")
	return nil
}

// sample logs the plane's counters whenever they change (every 100 ms).
func (w *ours) sample(ctx context.Context, lg *obsLog) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		v := w.collect(ctx)
		w.mu.Lock()
		changed := v != w.last
		w.last = v
		w.mu.Unlock()
		if changed {
			lg.line("M", time.Now().UnixNano(), v[0], v[1], v[2], v[3], v[4])
		}
	}
}

// collect sums the watch plane's metrics over their attributes.
func (w *ours) collect(ctx context.Context) [5]int64 {
	var rm metricdata.ResourceMetrics
	var v [5]int64
	if err := w.reader.Collect(ctx, &rm); err != nil {
		return v
	}
	idx := map[string]int{"coordkit.watchplane.opens": 0, "coordkit.watchplane.relists": 1, "coordkit.watchplane.resyncs": 2,
		"coordkit.watchplane.upstream": 3, "coordkit.watchplane.subscriptions": 4}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			i, ok := idx[mt.Name]
			if !ok {
				continue
			}
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					v[i] += p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					v[i] += p.Value
				}
			}
		}
	}
	return v
}

// counts waits until the plane's gauges have held still for a second (the
// ownership member subscribes as it acquires), at most 30 s.
func (w *ours) counts() (subs, upstream int) {
	v := w.collect(context.Background())
	since := time.Now()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && time.Since(since) < time.Second; {
		time.Sleep(100 * time.Millisecond)
		if n := w.collect(context.Background()); n[3] != v[3] || n[4] != v[4] {
			v, since = n, time.Now()
		}
	}
	return int(v[4]), int(v[3])
}

func (w *ours) end() (held, leases, owned, registered, regs, losses int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.leases {
		if l.Valid() {
			held++
		}
	}
	if w.member != nil {
		owned = len(w.member.Owned())
	}
	for _, r := range w.regs {
		if r.Registered() {
			registered++
		}
	}
	return held, len(w.leases), owned, registered, len(w.regs), w.losses
}
