// Package sentinel builds the sentinel errors of coordkit packages that say, through
// coord.RetryableError, that a retry can succeed. A sentinel that cannot be retried
// needs nothing from here: errors.New is enough, and coord.Retryable says false.
package sentinel

// Retryable returns a sentinel error with message msg whose Retryable method
// reports true, so coord.Retryable(err) is true for every error wrapping it.
// Compare it with errors.Is, like any sentinel.
func Retryable(msg string) error { return &retryable{msg: msg} }

type retryable struct{ msg string }

func (e *retryable) Error() string   { return e.msg }
func (e *retryable) Retryable() bool { return true }
