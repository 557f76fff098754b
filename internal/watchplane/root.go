package watchplane

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/etcderr"
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
	idleSince   time.Time                    // when the last subscriber left; zero while it has some
}

func newRoot(p *Plane, prefix string, release func()) *root {
	r := &root{
		p: p, prefix: prefix, attrs: rootAttrs(prefix), release: release,
		reopen: make(chan struct{}, 1),
		kvs:    map[string]*mvccpb.KeyValue{}, hist: newHistory(p.cfg.History),
		subs: map[*Sub]struct{}{}, byKey: map[string]map[*Sub]struct{}{}, prefixes: map[*Sub]struct{}{},
		confirmedCh: make(chan struct{}), revCh: make(chan struct{}),
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
		r.idleSince = r.p.cfg.Clock.Now()
		r.p.poke()
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

// run is the root's list/watch loop: list when there is no mirror (or after a
// compaction), watch from the mirror's revision, and after the watch ends for
// any reason wait a full-jitter backoff and resume. It returns when the root
// closes.
func (r *root) run() {
	defer r.p.wg.Done()
	defer r.release()
	attempt, needList, reason := 0, true, "first"
	for r.ctx.Err() == nil {
		if needList {
			if err := r.list(); err != nil {
				if r.ctx.Err() != nil {
					return
				}
				r.fail("list failed; keeping the mirror", err, attempt)
				if !r.pause(attempt) {
					return
				}
				attempt++
				continue
			}
			needList = false
		}
		wch, cancel, err := r.open(reason)
		if err == nil {
			var delivered, compacted bool
			delivered, compacted, err = r.consume(wch)
			cancel()
			if delivered {
				attempt = 0
			}
			reason = "resume"
			switch {
			case compacted:
				needList, reason = true, "compacted"
			case errors.Is(err, errHung):
				reason = "hung"
			}
		}
		if r.ctx.Err() != nil || r.p.cli.Ctx().Err() != nil {
			return // closing (a closed client closes the plane)
		}
		r.fail("watch ended; resuming", err, attempt)
		if !r.pause(attempt) {
			return
		}
		attempt++
	}
}

// fail records err as the root's error and logs it.
func (r *root) fail(msg string, err error, attempt int) {
	r.mu.Lock()
	r.err, r.opened = err, time.Time{}
	rev := r.rev
	r.mu.Unlock()
	r.p.cfg.Logger.Info("watchplane: "+msg, "root", r.prefix, "revision", rev, "attempt", attempt, "err", err)
}

// pause waits the backoff before attempt (the most demanding subscriber's
// schedule) after asking the client to reconnect now, so that the jittered
// schedule, not gRPC's own, decides when a fleet comes back. It returns false
// when the root closes.
func (r *root) pause(attempt int) bool {
	if cc := r.p.cli.ActiveConnection(); cc != nil {
		cc.ResetConnectBackoff()
	}
	t := r.p.cfg.Clock.NewTimer(r.backoff().Delay(attempt))
	defer t.Stop()
	select {
	case <-r.ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// admit waits for a token of the tenant's reconnect budget. It returns false
// when the root closes.
func (r *root) admit() bool {
	for {
		wait, err := r.p.cfg.Quotas.AllowReconnect(r.prefix)
		if err == nil {
			return true
		}
		r.p.in.throttled.Add(r.ctx, 1, metric.WithAttributeSet(r.attrs))
		t := r.p.cfg.Clock.NewTimer(wait)
		select {
		case <-r.ctx.Done():
			t.Stop()
			return false
		case <-t.C():
		}
	}
}

// list reads the whole root at one linearizable revision and replaces the
// mirror; every subscriber whose revision it passed resyncs from it.
func (r *root) list() error {
	if !r.admit() {
		return context.Cause(r.ctx)
	}
	sent := r.p.cfg.Clock.Now()
	ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(r.ctx), r.p.cfg.RequestTimeout)
	defer cancel()
	resp, err := r.p.cli.Get(ctx, r.prefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("watchplane: list %s: %w", r.prefix, etcderr.Classify(err))
	}
	kvs := make(map[string]*mvccpb.KeyValue, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		kvs[string(kv.Key)] = kv
	}
	rev := resp.Header.Revision
	r.mu.Lock()
	relist := r.listed
	reason := resyncInitial
	if relist {
		reason = resyncRelist
	}
	r.kvs, r.listed, r.err = kvs, true, nil
	r.setRev(max(r.rev, rev))
	r.hist.reset(rev + 1)
	for s := range r.subs {
		if s.from <= rev {
			s.needResync(reason)
		}
	}
	r.confirmLocked(sent)
	r.mu.Unlock()
	if relist {
		r.p.relists.Add(1)
		r.p.in.relists.Add(r.ctx, 1, metric.WithAttributeSet(r.attrs))
		r.p.cfg.Logger.Info("watchplane: re-listed", "root", r.prefix, "revision", rev, "keys", len(kvs))
	}
	return nil
}

// open starts the watch from the mirror's revision, on the plane's stream, with
// progress notifications. clientv3's Watch blocks until etcd confirms the watch
// — forever while etcd is unreachable — so the wait is bounded by
// RequestTimeout; on timeout the watch is cancelled.
func (r *root) open(reason string) (clientv3.WatchChan, context.CancelFunc, error) {
	if !r.admit() {
		return nil, nil, context.Cause(r.ctx)
	}
	r.mu.Lock()
	from := r.rev + 1
	r.mu.Unlock()
	ctx, cancel := context.WithCancel(r.p.stream)
	stop := context.AfterFunc(r.ctx, cancel) // the root's end ends the watch
	deadline, dcancel := context.WithTimeout(r.ctx, r.p.cfg.RequestTimeout)
	defer dcancel()
	watchdog := context.AfterFunc(deadline, cancel)
	wch := r.p.cli.Watch(ctx, r.prefix, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithProgressNotify())
	if !watchdog() {
		stop()
		cancel()
		if r.ctx.Err() != nil {
			return nil, nil, context.Cause(r.ctx)
		}
		return nil, nil, fmt.Errorf("watchplane: watch %s from revision %d: %w", r.prefix, from, errOpenTimeout)
	}
	r.p.opens.Add(1)
	r.p.in.opens.Add(r.ctx, 1, withReason(r.attrs, reason))
	r.mu.Lock()
	r.opened = r.p.cfg.Clock.Now()
	r.mu.Unlock()
	return wch, func() { stop(); cancel() }, nil
}

// consume applies the watch's responses until it ends: closed, failed,
// compacted (the mirror must be re-listed) or presumed hung by the probe.
func (r *root) consume(wch clientv3.WatchChan) (delivered, compacted bool, err error) {
	for {
		select {
		case <-r.ctx.Done():
			return delivered, false, context.Cause(r.ctx)
		case <-r.reopen:
			return delivered, false, errHung
		case wr, ok := <-wch:
			switch {
			case !ok:
				return delivered, false, errStreamClosed
			case wr.CompactRevision != 0 || errors.Is(wr.Err(), rpctypes.ErrCompacted):
				return delivered, true, fmt.Errorf("watchplane: watch %s: compacted at %d: %w", r.prefix, wr.CompactRevision, coord.ErrCompacted)
			case wr.Err() != nil:
				return delivered, false, fmt.Errorf("watchplane: watch %s: %w", r.prefix, etcderr.Classify(wr.Err()))
			case wr.Created:
				continue
			}
			delivered = true
			r.apply(&wr)
		}
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

// backoff is the reconnect schedule: the Backoff of the subscriber with the
// smallest cap (a zero cap counts as coord's default).
func (r *root) backoff() coord.Backoff {
	r.mu.Lock()
	defer r.mu.Unlock()
	var best coord.Backoff
	first := true
	for s := range r.subs {
		b := s.spec.Backoff
		if first || b.Ceiling(1<<20) < best.Ceiling(1<<20) {
			best, first = b, false
		}
	}
	return best
}

// needs returns the probe interval and the reset-after the root's subscribers
// ask for (the smallest), and whether any asked at all.
func (r *root) needs() (probe, resetAfter time.Duration, asked bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	probe, resetAfter = DefaultProbeInterval, DefaultResetAfter
	for s := range r.subs {
		if s.spec.ProbeInterval > 0 {
			asked = true
			probe = min(probe, s.spec.ProbeInterval)
			if s.spec.ResetAfter > 0 {
				resetAfter = min(resetAfter, s.spec.ResetAfter)
			}
		}
	}
	return probe, resetAfter, asked
}

// confirmLocked records that the mirror was current as of sent (r.mu held).
func (r *root) confirmLocked(sent time.Time) {
	if sent.After(r.confirmed) {
		r.confirmed = sent
		r.err = nil
		close(r.confirmedCh)
		r.confirmedCh = make(chan struct{})
	}
}

func (r *root) confirmedAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.confirmed
}

// confirmation returns the last confirmation and a channel closed at the next.
func (r *root) confirmation() (time.Time, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.confirmed, r.confirmedCh
}
