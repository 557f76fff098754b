package watchplane

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"

	"github.com/coordkit/coordkit/coord"
)

// root is one upstream watch: a prefix, its mirror, its history and the
// subscriptions under it.
type root struct {
	p       *Plane
	prefix  string
	attrs   attribute.Set
	release func() // gives the tenant's watch quota back (idempotent)
	ctx     context.Context
	cancel  context.CancelFunc
	reopen  chan struct{} // cap 1: the probe presumes the stream hung
	slow    int           // consecutive lists and watch opens that ran out of time (the loop's own)

	mu          sync.Mutex
	listed      bool
	kvs         map[string]*mvccpb.KeyValue // the mirror
	rev         int64                       // every event up to rev is in the mirror
	hist        history
	subs        map[*Sub]struct{}
	byKey       map[string]map[*Sub]struct{} // exact-key subscriptions
	prefixes    map[*Sub]struct{}            // prefix subscriptions
	err         error                        // last list/open/watch error; nil once delivering or confirmed
	confirmed   time.Time                    // send time of the last read that found the mirror current
	confirmedCh chan struct{}                // closed and replaced at each confirmation
	revCh       chan struct{}                // closed and replaced when rev advances
	opened      time.Time                    // when the current watch was opened; zero while none is
	started     time.Time                    // when the root was created
	opens       int64                        // watch opens so far
	restarts    int64                        // list or watch attempts that failed or ended, to be retried
	relists     int64                        // re-lists so far (the first list excluded)
	idleSince   time.Time                    // when the last subscriber left; zero while it has some
}

func newRoot(p *Plane, prefix string, release func()) *root {
	r := &root{
		p: p, prefix: prefix, attrs: rootAttrs(prefix), release: release,
		reopen: make(chan struct{}, 1),
		kvs:    map[string]*mvccpb.KeyValue{}, hist: newHistory(p.cfg.History),
		subs: map[*Sub]struct{}{}, byKey: map[string]map[*Sub]struct{}{}, prefixes: map[*Sub]struct{}{},
		confirmedCh: make(chan struct{}), revCh: make(chan struct{}),
		started: p.cfg.Clock.Now(),
	}
	r.ctx, r.cancel = context.WithCancel(p.ctx)
	return r
}

// subscribe adds a subscription and decides where it starts (p.mu held).
func (r *root) subscribe(spec Spec) *Sub {
	s := &Sub{r: r, spec: spec, ready: make(chan struct{}, 1), done: make(chan struct{}), from: spec.From}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.subs[s] = struct{}{}
	r.idleSince = time.Time{}
	if spec.Prefix {
		r.prefixes[s] = struct{}{}
	} else {
		if r.byKey[spec.Key] == nil {
			r.byKey[spec.Key] = map[*Sub]struct{}{}
		}
		r.byKey[spec.Key][s] = struct{}{}
	}
	switch {
	case !r.listed:
		// The first list decides (listed).
	case spec.From == 0:
		s.needResync(resyncInitial)
	case spec.From > r.rev:
		// Live from the next event.
	case r.hist.covers(spec.From):
		if q := r.hist.since(spec.From, func(ev *clientv3.Event) bool { return s.matches(string(ev.Kv.Key)) }); len(q) > r.p.cfg.Buffer {
			s.needResync(resyncOverflow)
		} else if len(q) > 0 {
			s.queue = q
			s.signal()
		}
	default:
		s.needResync(resyncHistory)
	}
	return s
}

// unsubscribe removes s; the root goes idle with its last subscriber.
func (r *root) unsubscribe(s *Sub) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.subs[s]; !ok {
		return
	}
	delete(r.subs, s)
	delete(r.prefixes, s)
	if m := r.byKey[s.spec.Key]; m != nil {
		delete(m, s)
		if len(m) == 0 {
			delete(r.byKey, s.spec.Key)
		}
	}
	s.ended, s.queue = true, nil
	if len(r.subs) == 0 {
		// The maintain loop closes it at a probe tick past IdleTimeout (no wake
		// now: a root going idle and busy again at every Acquire and Release of
		// a lone lease would wake it twice per lease).
		r.idleSince = r.p.cfg.Clock.Now()
	}
}

func (r *root) subCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.subs)
}

// close ends the root's loop and every subscription on it.
func (r *root) close() {
	r.cancel()
	r.mu.Lock()
	subs := make([]*Sub, 0, len(r.subs))
	for s := range r.subs {
		s.ended = true
		subs = append(subs, s)
	}
	r.mu.Unlock()
	for _, s := range subs {
		s.end()
	}
}

// apply updates the mirror and the history with one response and hands each
// event to the subscriptions it matches; it never waits for a subscriber.
func (r *root) apply(wr *clientv3.WatchResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rev := r.rev
	for _, ev := range wr.Events {
		if ev.Kv.ModRevision <= r.rev {
			continue // in the mirror already
		}
		key := string(ev.Kv.Key)
		if ev.Type == mvccpb.PUT {
			r.kvs[key] = ev.Kv
		} else {
			delete(r.kvs, key)
		}
		r.hist.add(ev)
		for s := range r.byKey[key] {
			s.push(ev)
		}
		for s := range r.prefixes {
			if strings.HasPrefix(key, s.spec.Key) {
				s.push(ev)
			}
		}
		rev = max(rev, ev.Kv.ModRevision)
	}
	if wr.IsProgressNotify() {
		rev = max(rev, wr.Header.Revision) // every event up to it has been sent
	}
	r.setRev(rev)
	r.err = nil
}

// setRev advances the mirror's revision (r.mu held).
func (r *root) setRev(rev int64) {
	if rev > r.rev {
		r.rev = rev
		close(r.revCh)
		r.revCh = make(chan struct{})
	}
}

// rangeKVs returns the mirror's state of s's range, sorted by key (r.mu held).
func (r *root) rangeKVs(s *Sub) []*mvccpb.KeyValue {
	if !s.spec.Prefix {
		if kv, ok := r.kvs[s.spec.Key]; ok {
			return []*mvccpb.KeyValue{kv}
		}
		return nil
	}
	var out []*mvccpb.KeyValue
	for k, kv := range r.kvs {
		if strings.HasPrefix(k, s.spec.Key) {
			out = append(out, kv)
		}
	}
	slices.SortFunc(out, func(a, b *mvccpb.KeyValue) int { return cmp.Compare(string(a.Key), string(b.Key)) })
	return out
}

// reqs is what the root's subscribers ask of it (see Spec): the most demanding.
type reqs struct {
	probe, resetAfter, timeout time.Duration
	backoff                    coord.Backoff
	asked                      bool // a subscriber asked for a probe interval: it reads Confirmed
}

func (r *root) needs() reqs {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := reqs{probe: DefaultProbeInterval, resetAfter: DefaultResetAfter, timeout: r.p.cfg.RequestTimeout}
	first := true
	for s := range r.subs {
		sp := s.spec
		if sp.ProbeInterval > 0 {
			q.asked = true
			q.probe = min(q.probe, sp.ProbeInterval)
			if sp.ResetAfter > 0 {
				q.resetAfter = min(q.resetAfter, sp.ResetAfter)
			}
		}
		if sp.RequestTimeout > 0 {
			q.timeout = min(q.timeout, sp.RequestTimeout)
		}
		if first || sp.Backoff.Ceiling(1<<20) < q.backoff.Ceiling(1<<20) {
			q.backoff, first = sp.Backoff, false
		}
	}
	return q
}
