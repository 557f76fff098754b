package correctnesslease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/etcderr"
)

// LeaseState is one lease as an operator sees it (List): its queue at one etcd
// revision, holder first. It confers no authority and carries no token.
type LeaseState struct {
	Tenant string
	Name   string
	// Prefix is the lease's election prefix, the lease of its tokens:
	// /tenants/{Tenant}/elections/{Name}.
	Prefix string
	// Queue is every key under Prefix, oldest (the holder) first.
	Queue []QueuedKey
	// Revision is the etcd revision the queue was read at.
	Revision int64
}

// QueuedKey is one session's key in a lease's queue.
type QueuedKey struct {
	Key string
	// CreateRevision is the key's create revision: the holder's is its token's
	// revision.
	CreateRevision int64
	// LeaseID is the etcd lease of the session that owns the key.
	LeaseID int64
	// Session is the session's member key value (host and pid), "" when the
	// member key is gone.
	Session string
	// TTL is the seconds left on the session's etcd lease, -1 when etcd says it
	// has expired.
	TTL int64
}

// Holder returns the holder's key (the oldest); ok false for an empty queue.
func (s LeaseState) Holder() (QueuedKey, bool) {
	if len(s.Queue) == 0 {
		return QueuedKey{}, false
	}
	return s.Queue[0], true
}

// Waiters returns how many keys wait behind the holder.
func (s LeaseState) Waiters() int { return max(0, len(s.Queue)-1) }

// LeaseList returns every lease of tenant that has a holder or a waiter, sorted by
// name, read at one etcd revision (one range request, keys only), each key with
// its session's member value and remaining TTL (one more request per session).
// tenant "" lists every tenant under /tenants/. It is read-only: an operator's
// view (coordctl), not a way to learn who leads — that is Observe. It blocks for
// the requests, bounded by ctx, and returns an error matching coord.ErrNoLeader
// when etcd has no leader, or a *coord.NameError for an invalid tenant.
func LeaseList(ctx context.Context, cli *clientv3.Client, tenant string) ([]LeaseState, error) {
	return list(ctx, cli, tenant, "")
}

// List is LeaseList.
//
// Deprecated: use LeaseList.
func List(ctx context.Context, cli *clientv3.Client, tenant string) ([]LeaseState, error) {
	return LeaseList(ctx, cli, tenant)
}

// LeaseGet returns one lease's queue as LeaseList does, or an error matching
// ErrNotFound when nobody holds or waits for it. Invalid names return
// *coord.NameError; etcd's errors are classified as LeaseList's. It blocks for
// the requests, bounded by ctx.
func LeaseGet(ctx context.Context, cli *clientv3.Client, tenant, name string) (LeaseState, error) {
	if _, err := coord.Key(tenant, coord.KindElections, name); err != nil {
		return LeaseState{}, err
	}
	got, err := list(ctx, cli, tenant, name)
	if err != nil {
		return LeaseState{}, err
	}
	if len(got) == 0 {
		return LeaseState{}, fmt.Errorf("%w: nobody holds or waits for lease %s of tenant %s", ErrNotFound, name, tenant)
	}
	return got[0], nil
}

// Get returns one lease's queue as List does; an empty Queue means nobody holds
// or waits for it. Invalid names return *coord.NameError.
//
// Deprecated: use LeaseGet, whose lease nobody holds or waits for is an error
// matching ErrNotFound.
func Get(ctx context.Context, cli *clientv3.Client, tenant, name string) (LeaseState, error) {
	s, err := LeaseGet(ctx, cli, tenant, name)
	if errors.Is(err, ErrNotFound) {
		return LeaseState{Tenant: tenant, Name: name, Prefix: "/tenants/" + tenant + "/elections/" + name}, nil
	}
	return s, err
}

func list(ctx context.Context, cli *clientv3.Client, tenant, name string) ([]LeaseState, error) {
	prefix := "/tenants/"
	if tenant != "" {
		p, err := coord.Prefix(tenant, coord.KindElections)
		if err != nil {
			return nil, err
		}
		prefix = p
		if name != "" {
			prefix += name + "/"
		}
	}
	ctx = clientv3.WithRequireLeader(ctx)
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("correctnesslease: list %s: %w", prefix, etcderr.Classify(err))
	}
	byPrefix := map[string]*LeaseState{}
	for _, kv := range resp.Kvs {
		t, n, id, ok := parseQueueKey(string(kv.Key))
		if !ok {
			continue
		}
		p := "/tenants/" + t + "/elections/" + n
		s := byPrefix[p]
		if s == nil {
			s = &LeaseState{Tenant: t, Name: n, Prefix: p, Revision: resp.Header.Revision}
			byPrefix[p] = s
		}
		s.Queue = append(s.Queue, QueuedKey{Key: string(kv.Key), CreateRevision: kv.CreateRevision, LeaseID: id})
	}
	out := make([]LeaseState, 0, len(byPrefix))
	sessions := map[int64]QueuedKey{} // lease id -> member value and TTL
	for _, s := range byPrefix {
		slices.SortFunc(s.Queue, func(a, b QueuedKey) int { return cmp.Compare(a.CreateRevision, b.CreateRevision) })
		for i, q := range s.Queue {
			info, ok := sessions[q.LeaseID]
			if !ok {
				if info, err = session(ctx, cli, s.Tenant, q.LeaseID); err != nil {
					return nil, err
				}
				sessions[q.LeaseID] = info
			}
			s.Queue[i].Session, s.Queue[i].TTL = info.Session, info.TTL
		}
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b LeaseState) int { return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Name, b.Name)) })
	return out, nil
}

// parseQueueKey splits /tenants/{t}/elections/{name}/{lease id hex} (a session's
// key is named after its etcd lease: Session.keyFor; a keys-only read carries no
// lease).
func parseQueueKey(key string) (tenant, name string, lease int64, ok bool) {
	parts := strings.Split(strings.TrimPrefix(key, "/tenants/"), "/")
	if len(parts) != 4 || parts[1] != string(coord.KindElections) || !strings.HasPrefix(key, "/tenants/") {
		return "", "", 0, false
	}
	id, err := strconv.ParseInt(parts[3], 16, 64)
	if err != nil {
		return "", "", 0, false
	}
	return parts[0], parts[2], id, true
}

// session reads a session's member key value and its lease's remaining TTL.
func session(ctx context.Context, cli *clientv3.Client, tenant string, id int64) (QueuedKey, error) {
	q := QueuedKey{TTL: -1}
	if id == 0 {
		return q, nil
	}
	member, err := coord.Key(tenant, coord.KindMembers, "session-"+strconv.FormatInt(id, 16))
	if err != nil {
		return q, err
	}
	resp, err := cli.Get(ctx, member)
	if err != nil {
		return q, fmt.Errorf("correctnesslease: read session %s: %w", member, etcderr.Classify(err))
	}
	if len(resp.Kvs) > 0 {
		q.Session = string(resp.Kvs[0].Value)
	}
	ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(id))
	if err != nil {
		return q, fmt.Errorf("correctnesslease: lease %x time to live: %w", id, etcderr.Classify(err))
	}
	q.TTL = ttl.TTL
	return q, nil
}
