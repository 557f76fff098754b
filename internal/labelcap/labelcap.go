// Package labelcap bounds the number of distinct values a metric attribute can
// take, so that a caller deriving names from data (a lease per customer, say)
// cannot create an unbounded number of time series.
package labelcap

import "sync"

// Other is the value reported for every value beyond the cap.
const Other = "other"

// Set admits the first max distinct values it is asked about; every later new
// value is reported as Other. Safe for concurrent use.
type Set struct {
	max  int
	mu   sync.Mutex
	seen map[string]struct{}
	full func() // called once, when the first value is refused
}

// New returns a Set admitting max distinct values (at least 1). full, if not nil,
// is called once, the first time a value is reported as Other (to log it).
func New(max int, full func()) *Set {
	return &Set{max: max, seen: map[string]struct{}{}, full: full}
}

// Value returns v when v is admitted (seen before, or one of the first max
// distinct values), and Other otherwise.
func (s *Set) Value(v string) string {
	s.mu.Lock()
	if _, ok := s.seen[v]; ok {
		s.mu.Unlock()
		return v
	}
	if len(s.seen) < s.max {
		s.seen[v] = struct{}{}
		s.mu.Unlock()
		return v
	}
	full := s.full
	s.full = nil
	s.mu.Unlock()
	if full != nil {
		full()
	}
	return Other
}
