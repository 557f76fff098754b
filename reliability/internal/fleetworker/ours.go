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
)

// ours is the mix written with coordkit, default configs, one client passed
// everywhere.
type ours struct {
	reader *sdkmetric.ManualReader
	leases []*correctnesslease.Lease
	member *ownership.Member
	regs   []*membership.Registration
	mu     sync.Mutex
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
	for i := range m.caches {
		key, sub := m.cacheKey(i), "c"+strconv.Itoa(i)
		c, err := failstatic.New(ctx, cli, failstatic.Config[int64]{Key: key,
			Decode: func(kvs []failstatic.KV) (int64, error) {
				if len(kvs) == 0 {
					return 0, nil
				}
				return kvs[0].ModRevision, nil
			}})
		if err != nil {
			return nil, fmt.Errorf("cache %s: %w", key, err)
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
				lg.state(sub, v.Revision, stateHash(members), nil)
			}
		}()
	}
	if m.leases > 0 || m.partition > 0 {
		s, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: m.tenant, TTL: m.ttl})
		if err != nil {
			return nil, fmt.Errorf("lease session: %w", err)
		}
		for i := range m.leases {
			l, err := correctnesslease.Acquire(ctx, s, m.name+"-l"+strconv.Itoa(i))
			if err != nil {
				return nil, fmt.Errorf("acquire: %w", err)
			}
			w.leases = append(w.leases, l)
		}
		if m.partition > 0 {
			g, err := ownership.New(cli, ownership.Config{Tenant: m.tenant, Group: "fleet", Partitions: m.partition})
			if err != nil {
				return nil, fmt.Errorf("ownership: %w", err)
			}
			if w.member, err = g.Join(ctx, s, nil); err != nil {
				return nil, fmt.Errorf("join: %w", err)
			}
		}
	}
	return w, nil
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

func (w *ours) end() (held, leases, owned, registered, regs int) {
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
	return held, len(w.leases), owned, registered, len(w.regs)
}
