package coord

import "time"

// Clock is the seam between coordkit and time. Every duration the SDK measures for
// correctness (renewal deadlines, staleness, backoff) goes through a Clock, so tests
// can replace it with a fake (coordtest.FakeClock). Implementations must be safe for
// concurrent use and Now must carry a monotonic reading.
type Clock interface {
	// Now returns the current time, with a monotonic reading.
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer created by a Clock. It follows the semantics of Go's
// own timers since Go 1.23, which is the one timer rule of coordkit: a Timer may
// be stopped and re-armed (Reset) freely, and once Stop or Reset has returned no
// value from an earlier setting is ever received from C — a tick that fired but
// was not received is discarded. A loop may therefore keep one Timer and Reset it
// at every step; it never sees a stale tick. coordtest.FakeClock behaves the same.
type Timer interface {
	// C returns the channel on which the fire time is delivered.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was active.
	Stop() bool
	// Reset re-arms the timer to fire after d; it reports whether it was active.
	Reset(d time.Duration) bool
}

// SystemClock returns the Clock of the running process (time.Now and time.Timer).
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time        { return t.t.C }
func (t sysTimer) Stop() bool                 { return t.t.Stop() }
func (t sysTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

// OrSystem returns c, or SystemClock() when c is nil. Packages use it to default
// their Config.Clock.
func OrSystem(c Clock) Clock {
	if c == nil {
		return SystemClock()
	}
	return c
}
