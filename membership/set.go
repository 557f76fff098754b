package membership

import (
	"cmp"
	"slices"
)

// memberSet is a Watcher's members, sorted by instance, published without
// copying or sorting: a snapshot shares the slice, and the next change after a
// snapshot copies it first (copy on write). A change costs a binary search and,
// for a join or a leave, one move of the slice — a burst of changes to a
// 10,000-member service never re-sorts it.
type memberSet struct {
	ms     []Member
	shared bool // ms is referenced by a published View
}

func (s *memberSet) find(instance string) (int, bool) {
	return slices.BinarySearchFunc(s.ms, instance, func(m Member, inst string) int { return cmp.Compare(m.Instance, inst) })
}

func (s *memberSet) own() {
	if s.shared {
		s.ms = slices.Clone(s.ms)
		s.shared = false
	}
}

// put adds or replaces m.
func (s *memberSet) put(m Member) {
	i, found := s.find(m.Instance)
	s.own()
	if found {
		s.ms[i] = m
		return
	}
	s.ms = slices.Insert(s.ms, i, m)
}

// remove deletes instance and reports whether it was there.
func (s *memberSet) remove(instance string) bool {
	i, found := s.find(instance)
	if !found {
		return false
	}
	s.own()
	s.ms = slices.Delete(s.ms, i, i+1)
	return true
}

// snapshot returns the members for a View; they must not be modified.
func (s *memberSet) snapshot() []Member {
	s.shared = true
	return s.ms
}

// equal reports whether s and o hold the same writes of the same keys.
func (s *memberSet) equal(o *memberSet) bool {
	return slices.EqualFunc(s.ms, o.ms, func(a, b Member) bool { return a.Instance == b.Instance && a.ModRevision == b.ModRevision })
}
