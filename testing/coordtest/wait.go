package coordtest

import (
	"sync"
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

// Wait waits for wg, or fails the test, saying what did not finish, when its
// goroutines are still running after timeout (they are left running: the
// failure is the point). A test whose goroutines wait on servers or on the code
// under test uses it instead of a bare wg.Wait. Call it from the test's goroutine.
func Wait(t testing.TB, wg *sync.WaitGroup, timeout time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	Recv(t, done, timeout, what+" did not finish")
}

// Until polls cond every interval until it holds, or fails the test, saying
// what did not happen, when it still does not hold after timeout. Call it from
// the test's goroutine.
func Until(t testing.TB, timeout, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, timeout)
		}
		time.Sleep(interval)
	}
}
