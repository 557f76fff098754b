package membership

import "testing"

// TestMemberSetEqualComparesEveryWrite: a resync after a compaction publishes a
// new View only when the relisted members differ from the watcher's (equal is
// false): a member that left, joined, or whose key was rewritten during the gap
// (same instance, another ModRevision) must be published, and an unchanged set
// must not be. An equal that matched on the instance alone, or on the
// revision alone, would keep a departed or stale member in View.
func TestMemberSetEqualComparesEveryWrite(t *testing.T) {
	set := func(ms ...Member) *memberSet { return &memberSet{ms: ms} }
	a1 := Member{Instance: "a", ModRevision: 10}
	a2 := Member{Instance: "a", ModRevision: 12}
	b1 := Member{Instance: "b", ModRevision: 11}
	c1 := Member{Instance: "c", ModRevision: 11}
	for _, tc := range []struct {
		name string
		x, y *memberSet
		want bool
	}{
		{"the same writes", set(a1, b1), set(a1, b1), true},
		{"a key rewritten during the gap", set(a1, b1), set(a2, b1), false},
		{"another instance at the same revision", set(a1, b1), set(a1, c1), false},
		{"a member gone", set(a1, b1), set(a1), false},
		{"both empty", set(), set(), true},
	} {
		if got := tc.x.equal(tc.y); got != tc.want {
			t.Errorf("%s: equal = %v, want %v (a resync would publish %v)", tc.name, got, tc.want, !got)
		}
	}
}
