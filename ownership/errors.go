package ownership

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidConfig matches every *ConfigError.
	ErrInvalidConfig = errors.New("ownership: invalid config")

	// ErrClosed is returned (wrapped) by Leave and Join on a Member or Group
	// that has stopped: after Leave or Close, or once its session lost its
	// authority. Not retryable on the same session: Join again on a new one.
	ErrClosed = errors.New("ownership: member stopped")

	// ErrNotFound is returned (wrapped) by GroupGet when etcd holds nothing of
	// the group: no target, no member, no partition key (no member ever joined).
	ErrNotFound = errors.New("ownership: not found")
)

// ConfigError reports an invalid Config field or argument, or a Partitions
// count that differs from the group's (Field "Partitions"). It matches
// ErrInvalidConfig and, for an invalid name, unwraps to the *coord.NameError.
type ConfigError struct {
	Field  string // the Config field or argument, e.g. "Group", "session"
	Reason string // what is wrong with it
	Err    error  // the underlying error, e.g. a *coord.NameError; may be nil
}

// Error describes the invalid field.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("ownership: invalid config %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// RevokedError is the context.Cause of a Partition's context after a planned
// handoff: the assignment moved the partition to another member (Reason
// ReasonRebalance) or this member is leaving (ReasonLeave). The partition's key
// is still held until Partition.Done or the DrainTimeout, so nobody else holds
// it yet.
type RevokedError struct {
	Partition int
	Reason    Reason
	To        string // the member the target gives it to ("" when none yet)
}

// Error describes the revoke.
func (e *RevokedError) Error() string {
	return fmt.Sprintf("ownership: partition %d revoked (%s) for %q", e.Partition, e.Reason, e.To)
}
