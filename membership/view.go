package membership

import (
	"cmp"
	"slices"
)

// View is the whole membership of one service at one etcd revision. Every View
// a Watcher delivers is complete: consumers replace what they had, they never
// apply deltas. Views are immutable; do not modify Members or their Metadata.
type View struct {
	Tenant  string
	Service string
	// Revision is the etcd revision the view is exact at: the revision of the
	// list it came from or of the last change applied to it. 0 before the
	// first list.
	Revision int64
	// Members, sorted by Instance.
	Members []Member
	// Malformed lists keys under the service's prefix that are not member
	// records (a value that does not decode, or a deeper path), sorted. They
	// are not in Members.
	Malformed []string
}

// Member returns the member named instance, if present.
func (v View) Member(instance string) (Member, bool) {
	i, ok := slices.BinarySearchFunc(v.Members, instance, func(m Member, s string) int { return cmp.Compare(m.Instance, s) })
	if !ok {
		return Member{}, false
	}
	return v.Members[i], true
}
