package coordtest

import (
	"context"
	"sync"
	"time"

	"github.com/coordkit/coordkit/coord"
)

// FakeClock is a coord.Clock that moves only when the test calls Advance. Timers
// fire, in deadline order, when Advance passes their deadline. Safe for concurrent
// use.
type FakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  map[*fakeTimer]struct{}
	changed chan struct{} // closed and replaced whenever the set of timers changes
}

var _ coord.Clock = (*FakeClock)(nil)

// NewFakeClock returns a fake clock reading start.
func NewFakeClock(start time.Time) *FakeClock {
	return &FakeClock{now: start, timers: map[*fakeTimer]struct{}{}, changed: make(chan struct{})}
}

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires when the clock has advanced by d.
func (c *FakeClock) NewTimer(d time.Duration) coord.Timer {
	t := &fakeTimer{clock: c, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	defer c.mu.Unlock()
	t.arm(d)
	return t
}

// Advance moves the clock forward by d, firing every timer whose deadline is
// reached, earliest first.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	end := c.now.Add(d)
	for {
		var next *fakeTimer
		for t := range c.timers {
			if !t.when.After(end) && (next == nil || t.when.Before(next.when)) {
				next = t
			}
		}
		if next == nil {
			break
		}
		if next.when.After(c.now) {
			c.now = next.when
		}
		delete(c.timers, next)
		c.notify()
		select {
		case next.ch <- c.now:
		default:
		}
	}
	c.now = end
}

// Timers returns the number of armed timers.
func (c *FakeClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitTimers blocks until at least n timers are armed, so a test advances the
// clock only once the code under test is waiting on it. It returns ctx.Err() if ctx
// ends first.
func (c *FakeClock) WaitTimers(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		have, changed := len(c.timers), c.changed
		c.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// notify wakes WaitTimers; c.mu must be held.
func (c *FakeClock) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

type fakeTimer struct {
	clock *FakeClock
	ch    chan time.Time
	when  time.Time
}

// arm schedules t at now+d; t.clock.mu must be held.
func (t *fakeTimer) arm(d time.Duration) {
	c := t.clock
	t.when = c.now.Add(d)
	if d <= 0 {
		select {
		case t.ch <- c.now:
		default:
		}
		return
	}
	c.timers[t] = struct{}{}
	c.notify()
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

// Stop disarms the timer and discards a tick that fired but was not received,
// as Go's timers do since Go 1.23 (coord.Timer's rule).
func (t *fakeTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	_, active := c.timers[t]
	if active {
		delete(c.timers, t)
		c.notify()
	}
	t.drain()
	return active
}

// Reset re-arms the timer; a tick of the earlier setting that fired but was not
// received is discarded first (Go's timers since Go 1.23, coord.Timer's rule).
func (t *fakeTimer) Reset(d time.Duration) bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	_, active := c.timers[t]
	delete(c.timers, t)
	t.drain()
	t.arm(d)
	return active
}

// drain discards a tick waiting in the channel.
func (t *fakeTimer) drain() {
	select {
	case <-t.ch:
	default:
	}
}
