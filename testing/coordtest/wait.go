package coordtest

import (
	"testing"
	"time"
)

// Recv returns the next value received from ch, or fails the test, saying what
// did not arrive, when nothing came within timeout. A test waiting on a channel
// the code under test should send on uses it, so a broken build fails in seconds
// instead of hanging until the package timeout. Inside a testing/synctest bubble
// the timeout is the bubble's fake time. Call it from the test's goroutine.
func Recv[T any](t testing.TB, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing after %v", what, timeout)
		var zero T
		return zero
	}
}
