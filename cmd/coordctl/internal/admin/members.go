package admin

import (
	"context"
	"errors"
	"strconv"

	"github.com/coordkit/coordkit/membership"
)

// Service is one service's registered instances (package membership), read at
// one etcd revision.
type Service struct {
	Tenant  string   `json:"tenant"`
	Service string   `json:"service"`
	Members []Member `json:"members"` // sorted by instance
	// Malformed are keys under the service's prefix that are not member records
	// (a value that does not decode, a deeper path): someone else wrote there.
	Malformed []string `json:"malformed,omitempty"`
	Revision  int64    `json:"revision"` // etcd revision of the read
}

// Member is one registered instance.
type Member struct {
	Instance string            `json:"instance"`
	Addr     string            `json:"addr"`
	Metadata map[string]string `json:"metadata"`
	LeaseID  string            `json:"lease_id"` // hex, as etcdctl lease list prints it
	// SinceRevision is the key's create revision: registered since (etcd keeps
	// no wall time). A re-registration after a loss puts a new key: a new
	// revision. ModRevision moves with every metadata update too.
	SinceRevision int64 `json:"since_revision"`
	ModRevision   int64 `json:"mod_revision"`
}

// Members lists the services of tenant ("" = every tenant) with their
// members, or, with service set, that one service (listed even when it has no
// member).
func (a *Admin) Members(ctx context.Context, tenant, service string) ([]Service, error) {
	cli, err := a.etcd(ctx)
	if err != nil {
		return nil, err
	}
	var views []membership.View
	if service != "" {
		v, err := membership.ServiceGet(ctx, cli, tenant, service)
		if errors.Is(err, membership.ErrNotFound) { // nobody is registered: shown as such
			v, err = membership.View{Tenant: tenant, Service: service, Members: []membership.Member{}}, nil
		}
		if err != nil {
			return nil, err
		}
		views = []membership.View{v}
	} else if views, err = membership.ServiceList(ctx, cli, tenant); err != nil {
		return nil, err
	}
	out := make([]Service, 0, len(views))
	for _, v := range views {
		s := Service{Tenant: v.Tenant, Service: v.Service, Members: make([]Member, 0, len(v.Members)), Malformed: v.Malformed, Revision: v.Revision}
		for _, m := range v.Members {
			md := m.Metadata
			if md == nil {
				md = map[string]string{}
			}
			s.Members = append(s.Members, Member{Instance: m.Instance, Addr: m.Addr, Metadata: md, LeaseID: strconv.FormatInt(int64(m.Lease), 16),
				SinceRevision: m.CreateRevision, ModRevision: m.ModRevision})
		}
		out = append(out, s)
	}
	return out, nil
}
