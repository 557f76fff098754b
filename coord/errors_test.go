package coord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestErrorsMatch(t *testing.T) {
	stale := fmt.Errorf("write: %w", &StaleTokenError{Presented: newToken("a", 1), Highest: newToken("a", 2)})
	var se *StaleTokenError
	if !errors.Is(stale, ErrStaleToken) || !errors.As(stale, &se) || se.Highest.Revision() != 2 {
		t.Fatalf("stale token error does not match: %v", stale)
	}
	lost := fmt.Errorf("run: %w", &AuthorityLostError{Lease: "a", Reason: LossSessionExpired, Err: io.EOF})
	if !errors.Is(lost, ErrAuthorityLost) || !errors.Is(lost, io.EOF) {
		t.Fatalf("authority lost error does not match: %v", lost)
	}
	q := fmt.Errorf("put: %w", &QuotaError{Tenant: "t", Quota: "value_bytes", Limit: 1, Got: 2})
	if !errors.Is(q, ErrQuotaExceeded) {
		t.Fatal("quota")
	}
}

func TestRetryable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{ErrNoLeader, true},
		{fmt.Errorf("watch: %w", ErrCompacted), true},
		{timeoutErr{}, true},
		{&StaleTokenError{}, false},
		{&AuthorityLostError{Reason: LossRenewalDeadline, Err: timeoutErr{}}, false},
		{&QuotaError{}, false},
		{&NameError{}, false},
		{context.Canceled, false},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), false},
		{io.EOF, false},
	}
	for _, tt := range tests {
		if got := Retryable(tt.err); got != tt.want {
			t.Errorf("Retryable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
