package admin

import (
	"context"
	"strconv"

	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
)

// Lease is one correctness lease: its holder and queue, and (when PostgreSQL is
// configured) the highest token its fence row recorded.
type Lease struct {
	Tenant string `json:"tenant"`
	Name   string `json:"name"`
	Lease  string `json:"lease"` // the election prefix: the lease of its tokens and fence row
	Held   bool   `json:"held"`
	// Holder is the holding session's member value (host and pid).
	Holder        string `json:"holder"`
	HolderLeaseID string `json:"holder_lease_id"` // hex, as etcdctl lease list prints it
	// Token is the holder's fencing token (lease@revision); SinceRevision its
	// revision: etcd records no wall time, so "since" is the etcd revision at
	// which the holder's key was created.
	Token         string `json:"token"`
	SinceRevision int64  `json:"since_revision"`
	TTLSeconds    int64  `json:"ttl_seconds"` // left on the holder session's etcd lease (-1: expired)
	Waiters       int    `json:"waiters"`
	// FenceHighest is the fence row's revision (-1: not read); a holder token
	// below it is stale (its writes are rejected).
	FenceHighest int64        `json:"fence_highest"`
	Queue        []QueueEntry `json:"queue,omitempty"`
	Revision     int64        `json:"revision"` // etcd revision of the read
}

// QueueEntry is one key in a lease's queue.
type QueueEntry struct {
	Position       int    `json:"position"` // 0: holder
	Key            string `json:"key"`
	LeaseID        string `json:"lease_id"`
	Session        string `json:"session"`
	CreateRevision int64  `json:"create_revision"`
	TTLSeconds     int64  `json:"ttl_seconds"`
}

// Leases lists the leases of tenant ("" = every tenant) with their fence rows.
// When the fence rows cannot be read the leases are still returned, each
// FenceHighest -1 (unknown), with a *PartialError naming "fences".
func (a *Admin) Leases(ctx context.Context, tenant string) ([]Lease, error) {
	out, err := a.leaseStates(ctx, tenant)
	if err != nil {
		return nil, err
	}
	if err := a.addFences(ctx, out); err != nil {
		return out, partial(map[string]string{"fences": err.Error()})
	}
	return out, nil
}

// leaseStates lists the leases of tenant without their fence rows.
func (a *Admin) leaseStates(ctx context.Context, tenant string) ([]Lease, error) {
	cli, err := a.etcd(ctx)
	if err != nil {
		return nil, err
	}
	states, err := correctnesslease.LeaseList(ctx, cli, tenant)
	if err != nil {
		return nil, err
	}
	out := make([]Lease, 0, len(states))
	for _, s := range states {
		out = append(out, leaseOf(s, false))
	}
	return out, nil
}

// Lease returns one lease with its whole queue.
func (a *Admin) Lease(ctx context.Context, tenant, name string) (Lease, error) {
	cli, err := a.etcd(ctx)
	if err != nil {
		return Lease{}, err
	}
	s, err := correctnesslease.LeaseGet(ctx, cli, tenant, name)
	if err != nil {
		return Lease{}, err
	}
	l := []Lease{leaseOf(s, true)}
	if err := a.addFences(ctx, l); err != nil {
		return l[0], partial(map[string]string{"fences": err.Error()})
	}
	return l[0], nil
}

func leaseOf(s correctnesslease.LeaseState, queue bool) Lease {
	l := Lease{Tenant: s.Tenant, Name: s.Name, Lease: s.Prefix, Waiters: s.Waiters(), Revision: s.Revision, FenceHighest: -1, TTLSeconds: -1}
	if h, ok := s.Holder(); ok {
		l.Held = true
		l.Holder, l.HolderLeaseID = h.Session, strconv.FormatInt(h.LeaseID, 16)
		l.Token, l.SinceRevision, l.TTLSeconds = s.Prefix+"@"+strconv.FormatInt(h.CreateRevision, 10), h.CreateRevision, h.TTL
	}
	if queue {
		for i, q := range s.Queue {
			l.Queue = append(l.Queue, QueueEntry{Position: i, Key: q.Key, LeaseID: strconv.FormatInt(q.LeaseID, 16),
				Session: q.Session, CreateRevision: q.CreateRevision, TTLSeconds: q.TTL})
		}
	}
	return l
}

// addFences fills FenceHighest from one read of the fence table when
// PostgreSQL is configured (0: no row). It returns why it could not, leaving
// -1 (unknown).
func (a *Admin) addFences(ctx context.Context, ls []Lease) error {
	if a.cfg.DB == nil || len(ls) == 0 {
		return nil
	}
	pool, err := a.db(ctx)
	if err != nil {
		return err
	}
	prefix := "/tenants/"
	if len(ls) == 1 {
		prefix = ls[0].Lease
	}
	rows, err := a.fence.FenceList(ctx, pool, &pgfence.FenceListOpts{Prefix: prefix, Limit: pgfence.MaxListLimit})
	if err != nil {
		return err
	}
	highest := make(map[string]int64, len(rows))
	for _, r := range rows {
		highest[r.Lease] = r.Revision
	}
	for i := range ls {
		ls[i].FenceHighest = highest[ls[i].Lease]
	}
	return nil
}
