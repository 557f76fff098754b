package ownership

import (
	"cmp"
	"slices"
)

// assign is the assignment function: given the previous target (owner member id
// per partition, "" for none) and the live members, it returns the next target.
// It is pure and deterministic, so every member computes the same next target
// from the same inputs, and idempotent: assign(assign(prev, m), m) equals
// assign(prev, m), so a settled group writes nothing.
//
// "Sticky balanced": every member gets a quota of ⌊P/N⌋ partitions, and the
// P mod N members that held the most partitions before (ties: smaller member id)
// get one more. Each member keeps up to its quota of the partitions it held
// (lowest partition ids first); the rest (orphans of members that left, and
// overflow) go, in partition order, to the members below their quota, in
// member-id order. From a balanced target, a join moves only the partitions the
// joiner takes (⌊P/(N+1)⌋ or one more) and a leave moves only the leaver's
// (at most ⌈P/N⌉): see assign_test.go for the property test of that bound.
func assign(prev []string, members []string) []string {
	p := len(prev)
	next := make([]string, p)
	n := len(members)
	if n == 0 {
		return next
	}
	live := make(map[string]int, n) // member -> index in members
	for i, m := range members {
		live[m] = i
	}
	held := make([]int, n)
	for _, o := range prev {
		if i, ok := live[o]; ok {
			held[i]++
		}
	}
	// Quotas: the P mod N members holding the most get one more.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(held[b], held[a]); c != 0 {
			return c
		}
		return cmp.Compare(members[a], members[b])
	})
	quota := make([]int, n)
	for rank, i := range order {
		quota[i] = p / n
		if rank < p%n {
			quota[i]++
		}
	}
	load := make([]int, n)
	for part, o := range prev {
		if i, ok := live[o]; ok && load[i] < quota[i] {
			next[part] = o
			load[i]++
		}
	}
	// Orphans to the members below quota, in member-id order.
	byID := make([]int, n)
	for i := range byID {
		byID[i] = i
	}
	slices.SortFunc(byID, func(a, b int) int { return cmp.Compare(members[a], members[b]) })
	k := 0
	for part := range next {
		if next[part] != "" {
			continue
		}
		for load[byID[k]] >= quota[byID[k]] {
			k++
		}
		next[part] = members[byID[k]]
		load[byID[k]]++
	}
	return next
}

// moves counts the partitions whose owner differs between two targets.
func moves(a, b []string) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}
