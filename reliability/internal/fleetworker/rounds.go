package main

// What the two modes do alike, so that they are compared on their libraries
// alone: start their caches together, and hold their leases in rounds.

import (
	"sync"
	"time"
)

// startTogether runs start(0) to start(n-1) at once and returns the first
// error any of them returned, once all have.
func startTogether(n int, start func(i int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if err := start(i); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// firstRound starts a mode's hold and returns the outcome of its first round;
// hold goes on in the background.
func firstRound(hold func(first chan<- error)) error {
	held := make(chan error, 1)
	go hold(held)
	return <-held
}

// retryRound is what both modes' hold does with a round that failed with err:
// the first round's error goes to first and hold ends (false); a later one is
// logged, closeRound closes what the round opened, and after 500 ms the next
// round starts (true).
func retryRound(round int, err error, first chan<- error, lg *obsLog, closeRound func()) bool {
	if round == 0 {
		first <- err
		return false
	}
	lg.errorf("session round %d: %v", round, err)
	closeRound()
	time.Sleep(500 * time.Millisecond)
	return true
}

// heldRound logs that round holds everything, and says so to first if it is
// the first.
func heldRound(round int, first chan<- error, lg *obsLog) {
	lg.line("L", time.Now().UnixNano(), "held")
	if round == 0 {
		first <- nil
	}
}
