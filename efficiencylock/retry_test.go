package efficiencylock_test

import (
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/efficiencylock"
)

func TestRetryStrategies(t *testing.T) {
	t.Parallel()
	if _, again := efficiencylock.NoRetry().NextBackoff(0); again {
		t.Error("NoRetry retries")
	}
	fj := coord.Backoff{Base: time.Millisecond, Cap: 8 * time.Millisecond}
	for n := range 50 {
		d, again := fj.NextBackoff(n)
		ceiling := min(time.Millisecond<<min(n, 10), 8*time.Millisecond)
		if !again || d < 0 || d >= ceiling {
			t.Fatalf("coord.Backoff{1ms, 8ms}.NextBackoff(%d) = %v, %v; want [0, %v), true", n, d, again, ceiling)
		}
	}
	if d, again := efficiencylock.DefaultRetry().NextBackoff(100); !again || d >= efficiencylock.DefaultRetryCap {
		t.Errorf("DefaultRetry after 100 retries = %v, %v; want < %v, true", d, again, efficiencylock.DefaultRetryCap)
	}
	lim := efficiencylock.LimitRetry(nil, 2)
	for n, want := range []bool{true, true, false, false} {
		if _, again := lim.NextBackoff(n); again != want {
			t.Errorf("LimitRetry(nil, 2).NextBackoff(%d) again = %v, want %v", n, again, want)
		}
	}
}
