package coordtest

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// fails runs f with a fakeT and returns the message f failed with ("" if it did not).
func fails(t *testing.T, f func(ft *fakeT)) (msg string) {
	t.Helper()
	ft := &fakeT{TB: t}
	defer func() {
		if r := recover(); r != nil {
			fl, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			msg = fl.msg
		}
	}()
	f(ft)
	return ""
}

func TestRecvFailsInsteadOfHanging(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := Recv(t, ch, time.Second, "a value"); got != 7 {
		t.Fatalf("Recv = %d", got)
	}
	if msg := fails(t, func(ft *fakeT) { Recv(ft, make(chan int), 10*time.Millisecond, "the answer") }); !strings.Contains(msg, "the answer: nothing after 10ms") {
		t.Fatalf("Recv on a silent channel: %q", msg)
	}
}

func TestWaitFailsInsteadOfHanging(t *testing.T) {
	var wg sync.WaitGroup
	wg.Go(func() {})
	Wait(t, &wg, time.Second, "a goroutine that returns")
	release := make(chan struct{})
	defer close(release)
	var stuck sync.WaitGroup
	stuck.Go(func() { <-release })
	if msg := fails(t, func(ft *fakeT) { Wait(ft, &stuck, 10*time.Millisecond, "the writers") }); !strings.Contains(msg, "the writers did not finish: nothing after 10ms") {
		t.Fatalf("Wait on a stuck group: %q", msg)
	}
}

func TestUntilFailsInsteadOfHanging(t *testing.T) {
	n := 0
	Until(t, time.Second, time.Millisecond, "three polls", func() bool { n++; return n == 3 })
	if msg := fails(t, func(ft *fakeT) {
		Until(ft, 10*time.Millisecond, time.Millisecond, "the key deleted", func() bool { return false })
	}); !strings.Contains(msg, "the key deleted: not after 10ms") {
		t.Fatalf("Until on a condition that never holds: %q", msg)
	}
}
