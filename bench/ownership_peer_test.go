package bench

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// handRolled is partition ownership the way teams hand-roll it on etcd today,
// the peer of package ownership in these benchmarks: each member puts a key
// under <prefix>/members/ on its concurrency.Session and watches that prefix;
// on every change it reads the members, assigns partitions by rendezvous
// hashing, and holds one concurrency.Mutex per partition it is assigned (Lock
// queues behind the previous owner, which Unlocks the partitions it lost). The
// mutex key's create revision would be the token. One session (one lease, one
// keepalive stream) per member, as ownership has.
type handRolled struct {
	cli        *clientv3.Client
	s          *concurrency.Session
	id, prefix string
	partitions int
	obs        *ownObserver
	cancel     context.CancelFunc
	wg         sync.WaitGroup

	mu      sync.Mutex
	held    map[int]*concurrency.Mutex
	locking map[int]bool // a Lock in flight
	want    map[int]bool // assigned to this member by the latest reassign
}

// joinHandRolled registers id and starts holding its partitions.
func joinHandRolled(cli *clientv3.Client, prefix, id string, partitions, ttlSeconds int, obs *ownObserver) (*handRolled, error) {
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttlSeconds))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &handRolled{cli: cli, s: s, id: id, prefix: prefix, partitions: partitions, obs: obs, cancel: cancel,
		held: map[int]*concurrency.Mutex{}, locking: map[int]bool{}, want: map[int]bool{}}
	put, err := cli.Put(ctx, prefix+"/members/"+id, "", clientv3.WithLease(s.Lease()))
	if err != nil {
		cancel()
		_ = s.Close()
		return nil, err
	}
	wch := cli.Watch(ctx, prefix+"/members/", clientv3.WithPrefix(), clientv3.WithRev(put.Header.Revision+1))
	h.reassign(ctx)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for range wch {
			h.reassign(ctx)
		}
	}()
	return h, nil
}

// reassign reads the members and locks, unlocks or stops locking partitions
// to match the rendezvous assignment.
func (h *handRolled) reassign(ctx context.Context) {
	r, err := h.cli.Get(ctx, h.prefix+"/members/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return
	}
	var members []string
	for _, kv := range r.Kvs {
		members = append(members, strings.TrimPrefix(string(kv.Key), h.prefix+"/members/"))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for p := range h.partitions {
		mine := rendezvous(members, p) == h.id
		h.want[p] = mine
		if m, ok := h.held[p]; ok && !mine {
			delete(h.held, p)
			h.obs.released(p, h.id, true)
			h.wg.Add(1)
			go func() { defer h.wg.Done(); _ = m.Unlock(context.Background()) }()
		}
		if _, ok := h.held[p]; mine && !ok && !h.locking[p] {
			h.lock(ctx, p)
		}
	}
}

// lock acquires partition p's mutex in the background (h.mu held). A Lock in
// flight is never cancelled (a second Lock on the same session would reuse the
// key the first one's clean-up deletes): when it returns and the partition is
// no longer wanted, it is unlocked at once.
func (h *handRolled) lock(ctx context.Context, p int) {
	h.locking[p] = true
	m := concurrency.NewMutex(h.s, h.prefix+"/parts/"+strconv.Itoa(p))
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		err := m.Lock(ctx) // ctx ends only at leave
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.locking, p)
		if err != nil {
			return
		}
		if !h.want[p] || ctx.Err() != nil {
			_ = m.Unlock(context.Background())
			return
		}
		h.held[p] = m
		h.obs.acquired(p, h.id)
	}()
}

// leave deregisters, unlocks every partition and closes the session.
func (h *handRolled) leave(ctx context.Context) {
	_, _ = h.cli.Delete(ctx, h.prefix+"/members/"+h.id)
	h.cancel()
	h.mu.Lock()
	var unlocks sync.WaitGroup
	for p, m := range h.held {
		h.obs.released(p, h.id, true)
		unlocks.Go(func() { _ = m.Unlock(ctx) })
	}
	h.held = map[int]*concurrency.Mutex{}
	h.mu.Unlock()
	unlocks.Wait()
	h.wg.Wait()
	_ = h.s.Close()
}

// rendezvous returns the member with the highest hash for partition p.
func rendezvous(members []string, p int) string {
	sort.Strings(members)
	best, bestScore := "", uint64(0)
	for _, m := range members {
		f := fnv.New64a()
		fmt.Fprintf(f, "%s/%d", m, p)
		if s := mix64(f.Sum64()); best == "" || s > bestScore {
			best, bestScore = m, s
		}
	}
	return best
}

// mix64 is splitmix64's finaliser: fnv's low bits alone spread poorly.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// ownObserver records who holds each partition, as the members report it, the
// last time anything changed, and planned handoffs (release at the old owner to
// acquire at the new one).
type ownObserver struct {
	mu        sync.Mutex
	holder    map[int]string
	revokedAt map[int]time.Time
	handoffs  []time.Duration
	last      time.Time
}

func newOwnObserver() *ownObserver {
	return &ownObserver{holder: map[int]string{}, revokedAt: map[int]time.Time{}}
}

func (o *ownObserver) acquired(p int, who string) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if t, ok := o.revokedAt[p]; ok {
		o.handoffs = append(o.handoffs, now.Sub(t))
		delete(o.revokedAt, p)
	}
	o.holder[p] = who
	o.last = now
}

func (o *ownObserver) released(p int, who string, planned bool) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.holder[p] == who {
		delete(o.holder, p)
	}
	if planned {
		if _, ok := o.revokedAt[p]; !ok {
			o.revokedAt[p] = now
		}
	}
	o.last = now
}

// settle waits until every partition is held by a live member and nothing has
// changed for quiet, and returns the time of the last change; it fails after
// timeout saying what was missing.
func (o *ownObserver) settle(live map[string]bool, partitions int, quiet, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		o.mu.Lock()
		n, stray := 0, ""
		counts := map[string]int{}
		for p, who := range o.holder {
			if !live[who] {
				stray = fmt.Sprintf("partition %d held by %s, not a live member", p, who)
			}
			counts[who]++
			n++
		}
		last := o.last
		o.mu.Unlock()
		idle := ""
		for who := range live {
			if counts[who] == 0 {
				idle = who
			}
		}
		if n == partitions && stray == "" && idle == "" && time.Since(last) >= quiet {
			return last, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("not settled after %v: %d of %d partitions held; %s; idle member %q", timeout, n, partitions, stray, idle)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// takeHandoffs returns and clears the handoffs recorded so far.
func (o *ownObserver) takeHandoffs() []time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	h := o.handoffs
	o.handoffs = nil
	return h
}
