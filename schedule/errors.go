package schedule

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidConfig matches every *ConfigError.
	ErrInvalidConfig = errors.New("schedule: invalid config")
	// ErrInvalidJob matches every *JobError: a Job that Add refused.
	ErrInvalidJob = errors.New("schedule: invalid job")
	// ErrUnknownJob: an operator verb named a job that no scheduler has
	// registered in PostgreSQL (a job appears there once a scheduler that
	// declares it has owned its partition).
	ErrUnknownJob = errors.New("schedule: unknown job")
	// ErrNotFound is ErrUnknownJob, under the name every package's admin
	// verbs use for an absent object (docs/architecture.md, "Admin verbs").
	ErrNotFound = ErrUnknownJob
	// ErrStarted: Add was called after Run.
	ErrStarted = errors.New("schedule: scheduler already running")
	// ErrStopped: the scheduler's ownership member stopped because its
	// session lost its authority. Run again on a new session.
	ErrStopped = errors.New("schedule: scheduler stopped")
)

// ConfigError reports an invalid Config field or argument. It matches
// ErrInvalidConfig and, for an invalid name, unwraps to the *coord.NameError.
type ConfigError struct {
	Field  string // the Config field (or argument) the caller set
	Reason string
	Err    error // the cause, e.g. a *coord.NameError; may be nil
}

// Error describes the invalid field.
func (e *ConfigError) Error() string { return "schedule: invalid config " + e.Field + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the cause.
func (e *ConfigError) Unwrap() error { return e.Err }

// JobError reports an invalid Job field: an unparsable Cron expression, an
// unknown Zone, a missing Handler. It matches ErrInvalidJob.
type JobError struct {
	Job    string
	Field  string
	Reason string
	Err    error // the cause (the cron parser's, time.LoadLocation's); may be nil
}

// Error describes the invalid field.
func (e *JobError) Error() string {
	return fmt.Sprintf("schedule: invalid job %q: %s: %s", e.Job, e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidJob) true.
func (e *JobError) Is(target error) bool { return target == ErrInvalidJob }

// Unwrap returns the cause.
func (e *JobError) Unwrap() error { return e.Err }
