package coord

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBackoffCeiling(t *testing.T) {
	var b Backoff
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000}
	for n, w := range want {
		if got := b.Ceiling(n); got != w*time.Millisecond {
			t.Errorf("Ceiling(%d) = %v, want %v", n, got, w*time.Millisecond)
		}
	}
	if got := b.Ceiling(1 << 20); got != DefaultBackoffCap {
		t.Errorf("Ceiling(huge) = %v", got)
	}
}

func TestBackoffFullJitter(t *testing.T) {
	var b Backoff
	var seenLow, seenHigh bool
	for i := 0; i < 10000; i++ {
		d := b.Delay(3) // ceiling 800 ms
		if d < 0 || d >= 800*time.Millisecond {
			t.Fatalf("Delay(3) = %v outside [0, 800ms)", d)
		}
		seenLow = seenLow || d < 80*time.Millisecond
		seenHigh = seenHigh || d > 720*time.Millisecond
	}
	if !seenLow || !seenHigh {
		t.Fatal("delays do not cover the full jitter range")
	}
	fixed := Backoff{Rand: func(n int64) int64 { return n - 1 }}
	if got := fixed.Delay(0); got != 100*time.Millisecond-1 {
		t.Fatalf("deterministic Delay = %v", got)
	}
}

func TestBackoffWaitCancelled(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	boom := errors.New("boom")
	cancel(boom)
	b := Backoff{Base: time.Hour, Cap: time.Hour}
	if err := b.Wait(ctx, nil, 0); !errors.Is(err, boom) {
		t.Fatalf("Wait = %v, want cause", err)
	}
}
