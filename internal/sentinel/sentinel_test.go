package sentinel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/sentinel"
)

func TestRetryableThroughWrapping(t *testing.T) {
	errBusy := sentinel.Retryable("pkg: busy")
	wrapped := fmt.Errorf("pkg: op: %w", errBusy)
	if !errors.Is(wrapped, errBusy) || !coord.Retryable(wrapped) || wrapped.Error() != "pkg: op: pkg: busy" {
		t.Fatalf("wrapped sentinel: Is %v, Retryable %v, %q", errors.Is(wrapped, errBusy), coord.Retryable(wrapped), wrapped)
	}
	if errors.Is(errBusy, sentinel.Retryable("pkg: busy")) {
		t.Fatal("two sentinels with one message compare equal")
	}
	// The caller giving up wins over the sentinel.
	if coord.Retryable(errors.Join(errBusy, context.Canceled)) {
		t.Fatal("a cancelled operation reported retryable")
	}
}
