package ownership

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

// GroupRef names one ownership group.
type GroupRef struct {
	Tenant, Group string
}

// GroupList lists the ownership groups of tenant that have an assignment target in
// etcd, sorted by tenant and group: every group a member has joined once (the
// target outlives the last member, so a group nobody serves is still listed,
// and its GroupGet shows every partition unowned). tenant "" lists every
// tenant. It is one keys-only range (over /tenants/{tenant}/ownership/, or over
// /tenants/ for every tenant), for operators (coordctl ownership map); read
// each group with GroupGet. It blocks for the request, bounded by ctx, and
// returns a *ConfigError for a nil client or an invalid tenant (unwrapping to
// the *coord.NameError), and etcd's errors classified (coord.ErrNoLeader).
func GroupList(ctx context.Context, cli *clientv3.Client, tenant string) ([]GroupRef, error) {
	if cli == nil {
		return nil, &ConfigError{Field: "client", Reason: "nil *clientv3.Client"}
	}
	prefix := "/tenants/"
	if tenant != "" {
		if err := checkNames(tenant, "x"); err != nil {
			return nil, err
		}
		prefix, _ = coord.Prefix(tenant, coord.KindOwnership)
	}
	resp, err := cli.Get(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("ownership: list groups %s: %w", prefix, etcderr.Classify(err))
	}
	out := []GroupRef{}
	for _, kv := range resp.Kvs {
		// /tenants/{t}/ownership/{group}/target
		parts := strings.Split(strings.TrimPrefix(string(kv.Key), "/tenants/"), "/")
		if len(parts) != 4 || parts[1] != string(coord.KindOwnership) || parts[3] != "target" || checkNames(parts[0], parts[2]) != nil {
			continue
		}
		out = append(out, GroupRef{Tenant: parts[0], Group: parts[2]})
	}
	// Key order puts "a-b/…" before "a/…" ('-' < '/'): sort by the names.
	slices.SortFunc(out, func(a, b GroupRef) int { return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Group, b.Group)) })
	return out, nil
}

// Groups is GroupList.
//
// Deprecated: use GroupList.
func Groups(ctx context.Context, cli *clientv3.Client, tenant string) ([]GroupRef, error) {
	return GroupList(ctx, cli, tenant)
}
