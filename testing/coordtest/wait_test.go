package coordtest

import (
	"strings"
	"testing"
	"time"
)

func TestRecvFailsInsteadOfHanging(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := Recv(t, ch, time.Second, "a value"); got != 7 {
		t.Fatalf("Recv = %d", got)
	}
	ft := &fakeT{TB: t}
	func() {
		defer func() {
			if f, ok := recover().(fatal); !ok || !strings.Contains(f.msg, "the answer: nothing after 10ms") {
				t.Fatalf("Recv on a silent channel: %v", f)
			}
		}()
		Recv(ft, make(chan int), 10*time.Millisecond, "the answer")
	}()
}
