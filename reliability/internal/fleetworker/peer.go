package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/client/v3/naming/endpoints"

	"github.com/coordkit/coordkit/reliability/internal/fleethash"
)

// peer is the same mix written the way teams do today: a Get and a clientv3
// watch per cache, naming/endpoints for registrations and registry watchers,
// concurrency.Mutex per lease and a concurrency.Election (campaign and
// observe) for the group.
type peer struct {
	mu      sync.Mutex
	session *concurrency.Session // the current one
	losses  int
	lease   clientv3.LeaseID
	cli     *clientv3.Client
	leases  int
	regs    int
	watches atomic.Int64
	leader  atomic.Bool
}

func startPeer(ctx context.Context, cli *clientv3.Client, m mix, lg *obsLog) (*peer, error) {
	w := &peer{cli: cli, leases: m.leases, regs: m.regs}
	target := fmt.Sprintf("/tenants/%s/members/api", m.tenant)
	em, err := endpoints.NewManager(cli, target)
	if err != nil {
		return nil, err
	}
	if m.regs > 0 {
		gr, err := cli.Grant(ctx, int64(m.ttl/time.Second))
		if err != nil {
			return nil, fmt.Errorf("grant: %w", err)
		}
		w.lease = gr.ID
		ka, err := cli.KeepAlive(ctx, gr.ID)
		if err != nil {
			return nil, fmt.Errorf("keepalive: %w", err)
		}
		go func() {
			for range ka {
			}
		}()
		for i := range m.regs {
			key := target + "/" + m.name + "-" + strconv.Itoa(i)
			if err := em.AddEndpoint(ctx, key, endpoints.Endpoint{Addr: m.addr(i)}, clientv3.WithLease(gr.ID)); err != nil {
				return nil, fmt.Errorf("add endpoint: %w", err)
			}
		}
	}
	// The caches start together, as in the coordkit mix.
	if err := startTogether(m.caches, func(i int) error { return w.startCache(ctx, m, i, lg) }); err != nil {
		return nil, err
	}
	for i := range m.watchers {
		sub := "w" + strconv.Itoa(i)
		ch, err := em.NewWatchChannel(ctx)
		if err != nil {
			return nil, fmt.Errorf("endpoints watch: %w", err)
		}
		w.watches.Add(1)
		lg.line("R", sub, "prefix", target+"/")
		go func() {
			members := map[string]string{}
			for ups := range ch {
				for _, up := range ups {
					inst := strings.TrimPrefix(up.Key, target+"/")
					if up.Op == endpoints.Add {
						members[inst] = up.Endpoint.Addr
					} else {
						delete(members, inst)
					}
				}
				lg.state(sub, -1, fleethash.State(members), nil)
			}
		}()
	}
	if m.leases > 0 || m.partition > 0 {
		if err := firstRound(func(first chan<- error) { w.hold(ctx, m, lg, first) }); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// hold keeps the locks and the election: a concurrency session, every mutex
// locked on it, a campaign and an observer; when the session's lease is lost it
// logs the loss and starts again. The first round's outcome goes to first.
func (w *peer) hold(ctx context.Context, m mix, lg *obsLog, first chan<- error) {
	for round := 0; ctx.Err() == nil; round++ {
		s, err := concurrency.NewSession(w.cli, concurrency.WithTTL(int(m.ttl/time.Second)), concurrency.WithContext(ctx))
		for i := 0; err == nil && i < m.leases; i++ {
			err = concurrency.NewMutex(s, fmt.Sprintf("/tenants/%s/elections/%s-l%d", m.tenant, m.name, i)).Lock(ctx)
		}
		if err != nil {
			if !retryRound(round, err, first, lg, func() {
				if s != nil {
					_ = s.Close()
				}
			}) {
				return
			}
			continue
		}
		sctx, cancel := context.WithCancel(ctx)
		if m.partition > 0 {
			e := concurrency.NewElection(s, fmt.Sprintf("/tenants/%s/elections/fleet", m.tenant))
			w.watches.Add(1) // a campaign that waits watches its predecessor
			go func() {
				if err := e.Campaign(sctx, m.name); err == nil {
					w.leader.Store(true)
				}
				w.watches.Add(-1)
			}()
			obs := e.Observe(sctx)
			w.watches.Add(1)
			go func() {
				for range obs {
				}
				w.watches.Add(-1)
			}()
		}
		w.mu.Lock()
		w.session = s
		w.mu.Unlock()
		heldRound(round, first, lg)
		select {
		case <-ctx.Done():
			cancel()
			return
		case <-s.Done():
		}
		cancel()
		w.leader.Store(false)
		w.mu.Lock()
		w.losses++
		w.mu.Unlock()
		lg.line("L", time.Now().UnixNano(), "lost")
		_ = s.Close()
	}
}

// startCache reads cache i's key and watches it from the next revision.
func (w *peer) startCache(ctx context.Context, m mix, i int, lg *obsLog) error {
	cli := w.cli
	key, sub := m.cacheKey(i), "c"+strconv.Itoa(i)
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("get %s: %w", key, err)
	}
	var mod int64
	if len(resp.Kvs) > 0 {
		mod = resp.Kvs[0].ModRevision
	}
	lg.line("R", sub, "key", key)
	lg.line("S", sub, time.Now().UnixNano(), resp.Header.Revision, mod, "init")
	wch := cli.Watch(ctx, key, clientv3.WithRev(resp.Header.Revision+1))
	w.watches.Add(1)
	go func() {
		for wr := range wch {
			if err := wr.Err(); err != nil {
				lg.errorf("%s watch: %v", sub, err)
				continue
			}
			var chs []string
			var rev int64
			for _, ev := range wr.Events {
				del := ev.Type == mvccpb.DELETE
				chs = append(chs, change(string(ev.Kv.Key), ev.Kv.ModRevision, del))
				mod, rev = ev.Kv.ModRevision, ev.Kv.ModRevision
				if del {
					mod = 0
				}
			}
			if len(chs) > 0 {
				lg.state(sub, rev, strconv.FormatInt(mod, 10), chs)
			}
		}
	}()
	return nil
}

func (w *peer) counts() (subs, upstream int) {
	n := int(w.watches.Load())
	return n, n
}

func (w *peer) end() (held, leases, owned, registered, regs, losses int) {
	w.mu.Lock()
	s, losses := w.session, w.losses
	w.mu.Unlock()
	alive := s != nil
	if alive {
		select {
		case <-s.Done():
			alive = false
		default:
		}
	}
	if alive {
		held = w.leases
	}
	if w.leader.Load() && alive {
		owned = 1
	}
	if w.lease != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if r, err := w.cli.TimeToLive(ctx, w.lease); err == nil && r.TTL > 0 {
			registered = w.regs
		}
	}
	return held, w.leases, owned, registered, w.regs, losses
}
