package ownership

import (
	"strconv"
	"strings"

	"github.com/coordkit/coordkit/coord"
)

// leasePrefix starts every partition's lease name and the group's membership
// service name.
const leasePrefix = "ownership."

// LeaseName returns the correctnesslease name partition p of group is held
// under: "ownership.{group}.{p}". Its election prefix,
// /tenants/{tenant}/elections/ownership.{group}.{p}, is the lease of the
// partition's tokens, so pgfence keeps one fence row per partition. It does not
// validate group (New does).
func LeaseName(group string, p int) string {
	return leasePrefix + group + "." + strconv.Itoa(p)
}

// keys are the etcd keys of one group.
type keys struct {
	tenant, group string
	// service is the membership service of the group's members: their keys are
	// /tenants/{t}/members/ownership.{group}/{member id}.
	service string
	// target is /tenants/{t}/ownership/{group}/target: the assignment.
	target string
	// partitions is /tenants/{t}/elections/ownership.{group}. : every
	// partition's election prefix starts with it (so do those of a group named
	// "{group}.x": parsePartitionKey tells them apart).
	partitions string
}

// newKeys builds the keys of a validated tenant and group.
func newKeys(tenant, group string) keys {
	base, _ := coord.Key(tenant, coord.KindOwnership, group)
	elections, _ := coord.Prefix(tenant, coord.KindElections)
	return keys{
		tenant: tenant, group: group,
		service:    leasePrefix + group,
		target:     base + "/target",
		partitions: elections + leasePrefix + group + ".",
	}
}

// memberPrefix is the prefix of the members' keys.
func (k keys) memberPrefix() string {
	p, _ := coord.Key(k.tenant, coord.KindMembers, k.service)
	return p + "/"
}

// parsePartitionKey splits a key under k.partitions into the partition and the
// holder's session lease (hex, the member id). ok is false for a key of another
// group sharing the prefix, or a partition outside [0, n).
func (k keys) parsePartitionKey(key string, n int) (p int, member string, ok bool) {
	rest, found := strings.CutPrefix(key, k.partitions)
	if !found {
		return 0, "", false
	}
	num, member, found := strings.Cut(rest, "/")
	if !found || member == "" || strings.Contains(member, "/") || num == "" || (len(num) > 1 && num[0] == '0') {
		return 0, "", false
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, "", false
		}
	}
	p, err := strconv.Atoi(num)
	if err != nil || p >= n {
		return 0, "", false
	}
	return p, member, true
}
