package efficiencylock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/coordkit/coordkit/efficiencylock"
)

// The deprecated TryAcquireWith and AcquireWith (kept for programs written before
// TryAcquire and Acquire took *LockOpts) behave as the calls they forward to.
func TestDeprecatedWithForms(t *testing.T) {
	t.Parallel()
	l, _ := sharedLocker(t, efficiencylock.Config{})
	ctx := ctxT(t, 10*time.Second)
	lk, err := l.TryAcquireWith(ctx, "deprecated", 5*time.Second, nil)
	if err != nil {
		t.Fatalf("TryAcquireWith: %v", err)
	}
	releaseAtEnd(t, lk)
	if _, err := l.AcquireWith(ctx, "deprecated", 5*time.Second, efficiencylock.NoRetry(), nil); !errors.Is(err, efficiencylock.ErrNotAcquired) {
		t.Fatalf("AcquireWith(NoRetry) on a held lock = %v, want ErrNotAcquired after one attempt", err)
	}
}
