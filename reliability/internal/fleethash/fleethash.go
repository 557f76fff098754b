// Package fleethash is the state of a registry watcher in the fleet scenario:
// what fleetworker logs for each view it is given and what the scenario's
// checker computes from etcd's own history, so that the two agree.
package fleethash

import (
	"fmt"
	"hash/fnv"
	"slices"
)

// State is the member count and an FNV-1a hash of the sorted instance=addr
// lines of members.
func State(members map[string]string) string {
	lines := make([]string, 0, len(members))
	for inst, addr := range members {
		lines = append(lines, inst+"="+addr+"\n")
	}
	slices.Sort(lines)
	h := fnv.New64a()
	for _, l := range lines {
		h.Write([]byte(l))
	}
	return fmt.Sprintf("%d:%x", len(members), h.Sum64())
}
