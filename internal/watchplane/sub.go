package watchplane

import (
	"context"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Update is what a subscriber takes from its Sub: either the events of its range
// since the last Update, in revision order, or — Resync — the whole state of
// its range, which replaces what the subscriber knew.
type Update struct {
	// Events in revision order (several may share a revision: one
	// transaction). Shared with other subscribers: read-only.
	Events []*clientv3.Event
	// Resync is true when KVs is the whole state of the range at Revision: at
	// the start (Spec.From 0), when the subscriber's revision had left the
	// root's history, after the root re-listed (a compaction), or when the
	// subscriber fell Config.Buffer events behind. Events is then empty.
	Resync bool
	// KVs is the range's state at Revision, sorted by key (Resync only).
	// Read-only.
	KVs []*mvccpb.KeyValue
	// Revision: every event of the range up to Revision is in this Update or
	// an earlier one (or in KVs).
	Revision int64
}

// Sub is one subscription: a key or a prefix under a root, fed by the root's
// watch. Take what is ready after each signal on Ready. Safe for concurrent use.
type Sub struct {
	r     *root
	spec  Spec
	ready chan struct{} // cap 1: something to Take
	done  chan struct{} // closed when the subscription ends
	once  sync.Once

	// under r.mu
	from   int64             // events before this revision are skipped
	queue  []*clientv3.Event // events not taken yet
	resync string            // why the next Take is a resync; "" for none
	ended  bool
}

// Resync reasons (the coordkit.watchplane.resyncs reason attribute).
const (
	resyncInitial  = "initial"  // From 0, or the first list reached past From
	resyncHistory  = "history"  // From had left the root's history
	resyncRelist   = "relist"   // the root re-listed after a compaction
	resyncOverflow = "overflow" // the subscriber fell Buffer events behind
)

func (s *Sub) matches(key string) bool {
	if s.spec.Prefix {
		return strings.HasPrefix(key, s.spec.Key)
	}
	return key == s.spec.Key
}

// push queues one event of the range (r.mu held); past the buffer the queue is
// dropped and the subscriber is told to resync.
func (s *Sub) push(ev *clientv3.Event) {
	if s.ended || s.resync != "" || ev.Kv.ModRevision < s.from {
		return
	}
	if len(s.queue) >= s.r.p.cfg.Buffer {
		s.needResync(resyncOverflow)
		return
	}
	s.queue = append(s.queue, ev)
	s.signal()
}

// needResync drops the queue and makes the next Take a resync (r.mu held).
func (s *Sub) needResync(reason string) {
	s.queue = nil
	if s.resync == "" {
		s.resync = reason
		if reason != resyncInitial {
			s.r.p.resyncs.Add(1)
			s.r.p.in.resyncs.Add(context.Background(), 1, withReason(s.r.attrs, reason))
		}
	}
	s.signal()
}

func (s *Sub) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Ready returns a channel that receives whenever something may be taken. Take
// until it reports false after each receive.
func (s *Sub) Ready() <-chan struct{} { return s.ready }

// Done returns a channel closed when the subscription ends: Close, or the plane
// closed (its client was closed).
func (s *Sub) Done() <-chan struct{} { return s.done }

// Take returns the next Update, or false when there is none yet (before the
// root's first list, or nothing new). It never blocks on etcd.
func (s *Sub) Take() (Update, bool) {
	r := s.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.ended || !r.listed {
		return Update{}, false
	}
	if s.resync != "" {
		u := Update{Resync: true, KVs: r.rangeKVs(s), Revision: r.rev}
		s.resync, s.queue, s.from = "", nil, r.rev+1
		return u, true
	}
	if len(s.queue) == 0 {
		return Update{}, false
	}
	u := Update{Events: s.queue, Revision: r.rev}
	s.queue = nil
	return u, true
}

// Next blocks until an Update can be taken, ctx ends (its cause) or the
// subscription ends (ErrClosed).
func (s *Sub) Next(ctx context.Context) (Update, error) {
	for {
		if u, ok := s.Take(); ok {
			return u, nil
		}
		select {
		case <-s.ready:
		case <-s.done:
			return Update{}, ErrClosed
		case <-ctx.Done():
			return Update{}, context.Cause(ctx)
		}
	}
}

// Revision returns the root's revision: every event of the range up to it has
// been queued for this subscriber (or is in the resync it will take). 0 before
// the root's first list. It does not block.
func (s *Sub) Revision() int64 {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return s.r.rev
}

// Confirmed returns the send time, on the plane's clock, of the last read that
// found the root current (a list, or a probe the mirror had caught up with);
// zero before the first. Staleness is the time since. It does not block.
func (s *Sub) Confirmed() time.Time { return s.r.confirmedAt() }

// Confirmation returns Confirmed and a channel closed at the next confirmation,
// for a loop that reacts to them. It does not block.
func (s *Sub) Confirmation() (at time.Time, next <-chan struct{}) { return s.r.confirmation() }

// Health is a subscription's view of its root.
type Health struct {
	Watching bool      // the root's watch is open
	Opens    int64     // upstream watch opens of the root (the first, and every resume)
	Restarts int64     // the root's lists and watches that failed or ended and were retried
	Relists  int64     // re-lists of the root after the first list
	Err      error     // as Err
	Since    time.Time // when the root started (the plane's clock)
}

// Health returns the root's state. It does not block.
func (s *Sub) Health() Health {
	r := s.r
	r.mu.Lock()
	defer r.mu.Unlock()
	h := Health{Watching: !r.opened.IsZero(), Opens: r.opens, Restarts: r.restarts, Relists: r.relists, Err: r.err, Since: r.started}
	if s.ended {
		h.Err = ErrClosed
	}
	return h
}

// Sync blocks until the root is confirmed current by a read sent after the call
// (the plane probes at once): a consistent read from the mirror, as the
// Kubernetes API server serves one from its watch cache. Take after it returns
// to see everything etcd had at the call. It returns ctx's cause, or ErrClosed.
func (s *Sub) Sync(ctx context.Context) error {
	p := s.r.p
	t0 := p.cfg.Clock.Now()
	p.mu.Lock()
	p.syncing++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.syncing--
		p.mu.Unlock()
	}()
	for {
		at, changed := s.r.confirmation()
		if !at.Before(t0) {
			return nil
		}
		p.poke()
		select {
		case <-changed:
		case <-s.done:
			return ErrClosed
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Err returns the root's last list, open or watch error, nil once the root is
// delivering again or confirmed current; ErrClosed after the subscription ended.
// It does not block.
func (s *Sub) Err() error {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	if s.ended {
		return ErrClosed
	}
	return s.r.err
}

// Close ends the subscription. The root keeps its watch for IdleTimeout after
// its last subscriber. Calling Close again does nothing.
func (s *Sub) Close() {
	s.r.unsubscribe(s)
	s.end()
}

// end closes done once.
func (s *Sub) end() { s.once.Do(func() { close(s.done) }) }
