package failstatic

import "sync"

// Subscribe calls fn with the snapshots adopted after the call, in adoption order,
// one call at a time, on a goroutine of its own, each with the changes since the
// snapshot fn was last given (per key, its latest change, sorted by revision). A
// slow fn delays only itself, never the watch, and nothing queues up behind it:
// the snapshots adopted while fn runs are merged into one update — the latest
// snapshot with the merged changes — which fn gets next (counted in
// Status().Coalesced; a key created and deleted in between is reported deleted).
// The returned stop function ends the subscription without waiting for a running
// fn (an update already pending is still delivered); Close ends every
// subscription and waits for running callbacks to return, so fn must not block
// forever.
func (c *Cache[T]) Subscribe(fn func(s Snapshot[T], changes []Change)) (stop func()) {
	return c.subs.add(fn)
}

type subscribers[T any] struct {
	mu        sync.Mutex
	list      map[*subscriber[T]]struct{}
	closed    bool
	wg        sync.WaitGroup
	coalesced func() // counts one snapshot merged into a later update; set by New
}

type subscriber[T any] struct {
	fn      func(Snapshot[T], []Change)
	mu      sync.Mutex
	pending *update[T] // what was adopted since the last delivery, merged
	wake    chan struct{}
	done    chan struct{}
	stopped sync.Once
}

type update[T any] struct {
	s       Snapshot[T]
	changes []Change
}

func (ss *subscribers[T]) add(fn func(Snapshot[T], []Change)) func() {
	s := &subscriber[T]{fn: fn, wake: make(chan struct{}, 1), done: make(chan struct{})}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return func() {}
	}
	if ss.list == nil {
		ss.list = map[*subscriber[T]]struct{}{}
	}
	ss.list[s] = struct{}{}
	ss.wg.Add(1)
	go func() { defer ss.wg.Done(); s.loop() }()
	return func() {
		ss.mu.Lock()
		delete(ss.list, s)
		ss.mu.Unlock()
		s.stop()
	}
}

func (ss *subscribers[T]) publish(snap Snapshot[T], changes []Change) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for s := range ss.list {
		s.mu.Lock()
		if s.pending == nil {
			s.pending = &update[T]{snap, changes}
		} else {
			s.pending = &update[T]{snap, mergeChanges(s.pending.changes, changes)}
			ss.coalesced()
		}
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

func (ss *subscribers[T]) closeAll() {
	ss.mu.Lock()
	ss.closed = true
	for s := range ss.list {
		s.stop()
	}
	ss.list = nil
	ss.mu.Unlock()
	ss.wg.Wait()
}

func (s *subscriber[T]) stop() { s.stopped.Do(func() { close(s.done) }) }

// loop delivers the pending update until stopped. An update pending at a stop is
// still delivered: it is drained once more after done closes, so an update
// published between the last drain and the stop is not lost.
func (s *subscriber[T]) loop() {
	for {
		if s.drain() {
			continue
		}
		select {
		case <-s.done:
			s.drain()
			return
		case <-s.wake:
		}
	}
}

// drain delivers the pending update and reports whether there was one.
func (s *subscriber[T]) drain() bool {
	s.mu.Lock()
	u := s.pending
	s.pending = nil
	s.mu.Unlock()
	if u != nil {
		s.fn(u.s, u.changes)
	}
	return u != nil
}

// mergeChanges returns the changes of two consecutive updates as one: per key the
// newer change, still sorted by revision (every change of newer is later than
// every change of older). Neither argument is modified: they are shared by every
// subscriber.
func mergeChanges(older, newer []Change) []Change {
	if len(older) == 0 {
		return newer
	}
	inNewer := make(map[string]bool, len(newer))
	for _, ch := range newer {
		inNewer[ch.Key] = true
	}
	out := make([]Change, 0, len(older)+len(newer))
	for _, ch := range older {
		if !inNewer[ch.Key] {
			out = append(out, ch)
		}
	}
	return append(out, newer...)
}
