package failstatic

import "sync"

// Subscribe calls fn with every snapshot adopted after the call (and the changes
// since the previously adopted one, sorted by revision), in adoption order, one
// call at a time, on a goroutine of its own: a slow fn delays only itself (its
// pending snapshots queue up) and never the watch. The returned stop function
// ends the subscription without waiting for a running fn (updates already queued
// are still delivered); Close ends every subscription and waits for running
// callbacks to return, so fn must not block forever.
func (c *Cache[T]) Subscribe(fn func(s Snapshot[T], changes []Change)) (stop func()) {
	return c.subs.add(fn)
}

type subscribers[T any] struct {
	mu     sync.Mutex
	list   map[*subscriber[T]]struct{}
	closed bool
	wg     sync.WaitGroup
}

type subscriber[T any] struct {
	fn      func(Snapshot[T], []Change)
	mu      sync.Mutex
	queue   []update[T]
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
		s.queue = append(s.queue, update[T]{snap, changes})
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

// loop delivers queued updates in order until stopped. Updates queued before a
// stop are still delivered: the queue is drained once more after done closes, so
// an update queued between the last drain and the stop is not lost.
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

// drain delivers every queued update and reports whether there was any.
func (s *subscriber[T]) drain() bool {
	s.mu.Lock()
	q := s.queue
	s.queue = nil
	s.mu.Unlock()
	for _, u := range q {
		s.fn(u.s, u.changes)
	}
	return len(q) > 0
}
