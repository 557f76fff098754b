package admin

import (
	"context"
	"strconv"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/ownership"
)

// OwnershipMap is one ownership group's map (package ownership): which member
// holds each partition, with its token, read at one etcd revision.
type OwnershipMap struct {
	Tenant     string `json:"tenant"`
	Group      string `json:"group"`
	Partitions int    `json:"partitions"` // P (0: no target written)
	Unowned    int    `json:"unowned"`    // partitions nobody holds
	// Moving counts partitions whose holder is not the one the target assigns
	// them to: a handoff under way, or a target naming a member that has gone.
	Moving         int              `json:"moving"`
	Members        []OwnershipOwner `json:"members"`
	Owners         []PartitionOwner `json:"owners"` // by partition
	TargetRevision int64            `json:"target_revision"`
	Revision       int64            `json:"revision"`
}

// OwnershipOwner is one member of a group.
type OwnershipOwner struct {
	ID       string            `json:"id"` // its session's etcd lease id, hex
	Owns     int               `json:"owns"`
	Metadata map[string]string `json:"metadata"`
}

// PartitionOwner is one partition of a group.
type PartitionOwner struct {
	Partition int    `json:"partition"`
	Owner     string `json:"owner"`  // member id; "" unowned
	Target    string `json:"target"` // the member the assignment gives it to
	// Lease is the partition's correctness lease (its tokens' lease and its
	// fence row); Token the holder's token (lease@revision), SinceRevision its
	// revision: etcd keeps no wall time, so "since" is that revision.
	Lease         string `json:"lease"`
	Token         string `json:"token"`
	SinceRevision int64  `json:"since_revision"`
	Waiting       int    `json:"waiting"` // other members queued for it
}

// Ownership returns the maps of tenant's groups ("" = every tenant), or with
// group set that one group (tenant required).
func (a *Admin) Ownership(ctx context.Context, tenant, group string) ([]OwnershipMap, error) {
	cli, err := a.etcd(ctx)
	if err != nil {
		return nil, err
	}
	refs := []ownership.GroupRef{{Tenant: tenant, Group: group}}
	if group == "" {
		if refs, err = ownership.GroupList(ctx, cli, tenant); err != nil {
			return nil, err
		}
	}
	out := make([]OwnershipMap, 0, len(refs))
	for _, r := range refs {
		m, err := ownership.GroupGet(ctx, cli, r.Tenant, r.Group)
		if err != nil {
			return nil, err
		}
		out = append(out, ownershipMapOf(m))
	}
	return out, nil
}

func ownershipMapOf(m ownership.Map) OwnershipMap {
	o := OwnershipMap{Tenant: m.Tenant, Group: m.Group, Partitions: m.Partitions, Unowned: m.Unowned(), TargetRevision: m.TargetRevision,
		Revision: m.Revision, Members: make([]OwnershipOwner, 0, len(m.Members)), Owners: make([]PartitionOwner, 0, len(m.Owners))}
	owns := map[string]int{}
	for _, a := range m.Owners {
		lease, _ := coord.Key(m.Tenant, coord.KindElections, ownership.LeaseName(m.Group, a.Partition)) // valid: GroupGet checked the names
		p := PartitionOwner{Partition: a.Partition, Owner: a.Owner, Target: a.Target, Lease: lease, Waiting: a.Waiting}
		if a.Owner != "" {
			p.Token, p.SinceRevision = lease+"@"+strconv.FormatInt(a.Revision, 10), a.Revision
			owns[a.Owner]++
		}
		if a.Owner != a.Target {
			o.Moving++
		}
		o.Owners = append(o.Owners, p)
	}
	for _, mi := range m.Members {
		md := mi.Metadata
		if md == nil {
			md = map[string]string{}
		}
		o.Members = append(o.Members, OwnershipOwner{ID: mi.ID, Owns: owns[mi.ID], Metadata: md})
	}
	return o
}
