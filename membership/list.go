package membership

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/etcderr"
)

// ServiceGet reads the members of one service once, at one linearizable
// revision (one range request), and returns them as the View a Watcher's first
// list would give. It is the one-shot read for operators and scripts (coordctl
// members); a consumer that follows the membership uses Watch. It blocks for
// the request, bounded by ctx. It returns an error matching ErrNotFound when
// etcd holds no key under the service (nobody is registered), a *ConfigError
// (ErrInvalidConfig) for a nil client or an invalid name (unwrapping to the
// *coord.NameError), and etcd's errors classified (coord.ErrNoLeader when etcd
// has no leader).
func ServiceGet(ctx context.Context, cli *clientv3.Client, tenant, service string) (View, error) {
	v, err := List(ctx, cli, tenant, service)
	if err == nil && len(v.Members) == 0 && len(v.Malformed) == 0 {
		return View{}, fmt.Errorf("%w: nobody is registered for service %s of tenant %s", ErrNotFound, service, tenant)
	}
	return v, err
}

// List reads the members of one service as ServiceGet does; a service nobody
// is registered for is an empty View.
//
// Deprecated: use ServiceGet, whose service nobody is registered for is an
// error matching ErrNotFound.
func List(ctx context.Context, cli *clientv3.Client, tenant, service string) (View, error) {
	if cli == nil {
		return View{}, &ConfigError{Field: "client", Reason: "nil *clientv3.Client"}
	}
	prefix, err := servicePrefix("tenant", tenant, "service", service)
	if err != nil {
		return View{}, err
	}
	resp, err := cli.Get(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix())
	if err != nil {
		return View{}, fmt.Errorf("membership: list %s: %w", prefix, etcderr.Classify(err))
	}
	v := View{Tenant: tenant, Service: service, Revision: resp.Header.Revision, Members: []Member{}}
	for _, kv := range resp.Kvs { // in key order: Members come out sorted
		if m, ok := decodeKV(prefix, kv); ok {
			v.Members = append(v.Members, m)
		} else {
			v.Malformed = append(v.Malformed, string(kv.Key))
		}
	}
	return v, nil
}

// ServiceList reads every service of tenant with its members, all at one
// linearizable revision, sorted by tenant and service; each View is what
// ServiceGet returns for it. Keys directly under /tenants/{tenant}/members/ are not a
// service's (correctnesslease keeps its session keys there) and are skipped.
// tenant "" reads every tenant: one keys-only range over /tenants/ finds the
// tenants that have members, then one range per such tenant at that same
// revision (which fails with coord.ErrCompacted if etcd compacted it in
// between: call again). It blocks for the requests, bounded by ctx, and returns
// errors as ServiceGet does (an empty list, not ErrNotFound, when nobody is
// registered).
func ServiceList(ctx context.Context, cli *clientv3.Client, tenant string) ([]View, error) {
	if cli == nil {
		return nil, &ConfigError{Field: "client", Reason: "nil *clientv3.Client"}
	}
	ctx = clientv3.WithRequireLeader(ctx)
	if tenant != "" {
		if err := nameError("tenant", tenant, coord.MaxTenantLen); err != nil {
			return nil, err
		}
		return tenantServices(ctx, cli, tenant, 0)
	}
	resp, err := cli.Get(ctx, "/tenants/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("membership: list /tenants/: %w", etcderr.Classify(err))
	}
	var tenants []string
	for _, kv := range resp.Kvs {
		// /tenants/{t}/members/{service}/{instance}
		parts := strings.SplitN(strings.TrimPrefix(string(kv.Key), "/tenants/"), "/", 4)
		if len(parts) == 4 && parts[1] == string(coord.KindMembers) && coord.ValidateName("tenant", parts[0], coord.MaxTenantLen) == nil &&
			(len(tenants) == 0 || tenants[len(tenants)-1] != parts[0]) {
			tenants = append(tenants, parts[0]) // keys come in order: a tenant's are together
		}
	}
	out := []View{}
	for _, t := range tenants {
		vs, err := tenantServices(ctx, cli, t, resp.Header.Revision)
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	slices.SortStableFunc(out, func(a, b View) int { return cmp.Compare(a.Tenant, b.Tenant) }) // "a-b" came before "a"
	return out, nil
}

// Services is ServiceList.
//
// Deprecated: use ServiceList.
func Services(ctx context.Context, cli *clientv3.Client, tenant string) ([]View, error) {
	return ServiceList(ctx, cli, tenant)
}

// tenantServices reads /tenants/{tenant}/members/ (at rev, 0 = the current
// revision) and splits it into one View per service.
func tenantServices(ctx context.Context, cli *clientv3.Client, tenant string, rev int64) ([]View, error) {
	prefix, err := coord.Prefix(tenant, coord.KindMembers)
	if err != nil {
		return nil, err // cannot happen: the tenant is valid
	}
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		return nil, fmt.Errorf("membership: list %s: %w", prefix, etcderr.Classify(err))
	}
	if rev == 0 {
		rev = resp.Header.Revision // with WithRev, the header has the current revision instead
	}
	out := []View{}
	for _, kv := range resp.Kvs {
		service, _, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), prefix), "/")
		if !ok {
			continue // not under a service: a correctnesslease session key
		}
		if len(out) == 0 || out[len(out)-1].Service != service {
			out = append(out, View{Tenant: tenant, Service: service, Revision: rev, Members: []Member{}})
		}
		v := &out[len(out)-1]
		if m, ok := decodeKV(prefix+service+"/", kv); ok {
			v.Members = append(v.Members, m)
		} else {
			v.Malformed = append(v.Malformed, string(kv.Key))
		}
	}
	// Key order sorts "a-b/…" before "a/…" ('-' < '/'): sort by service name.
	slices.SortStableFunc(out, func(a, b View) int { return cmp.Compare(a.Service, b.Service) })
	return out, nil
}
