package ownership

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/etcderr"
	"github.com/coordkit/coordkit/internal/watchplane"
	"github.com/coordkit/coordkit/membership"
)

// Map is a group's ownership at one etcd revision, as an outsider sees it. It
// confers no authority.
type Map struct {
	Tenant, Group string
	// Revision is the etcd revision the map was read at.
	Revision int64
	// Partitions is P from the group's target; 0 when no member has written one.
	Partitions int
	// Members are the registered members, sorted by ID.
	Members []MemberInfo
	// Owners has one entry per partition (len Partitions), by partition.
	Owners []Assignment
	// TargetRevision is the mod revision of the target key (0: none).
	TargetRevision int64
}

// MemberInfo is one registered member.
type MemberInfo struct {
	ID       string            // the member id (its session's lease id, hex)
	Metadata map[string]string // as given to Join
}

// Assignment is one partition's state.
type Assignment struct {
	Partition int
	// Owner is the member whose key holds the partition (the oldest key of its
	// lease: FIFO), "" when nobody holds it.
	Owner string
	// Target is the member the assignment gives it to. Owner != Target while
	// it moves (or while the target names a member that has gone).
	Target string
	// Revision is the holder key's create revision: the revision of the
	// owner's fencing token for LeaseName(group, Partition); 0 when unowned.
	Revision int64
	// Waiting counts the other members queued for the partition.
	Waiting int
}

// Unowned counts the partitions nobody holds.
func (m Map) Unowned() int {
	n := 0
	for _, a := range m.Owners {
		if a.Owner == "" {
			n++
		}
	}
	return n
}

// GroupGet reads a group's map in one linearizable transaction (the member
// keys, the target and the partitions' keys, keys only). It blocks for that
// read, bounded by ctx. It returns an error matching ErrNotFound when etcd
// holds nothing of the group (no target, member or partition key: no member
// ever joined it); invalid names return a *ConfigError unwrapping to the
// *coord.NameError; etcd errors are classified (coord.ErrNoLeader matches).
func GroupGet(ctx context.Context, cli *clientv3.Client, tenant, group string) (Map, error) {
	m, err := Snapshot(ctx, cli, tenant, group)
	if err == nil && m.TargetRevision == 0 && len(m.Members) == 0 && m.Unowned() == 0 && m.Partitions == 0 {
		return Map{}, fmt.Errorf("%w: no member ever joined group %s of tenant %s", ErrNotFound, group, tenant)
	}
	return m, err
}

// Snapshot reads a group's map as GroupGet does; a group no member ever
// joined is a Map without partitions or members.
//
// Deprecated: use GroupGet, whose unknown group is an error matching
// ErrNotFound.
func Snapshot(ctx context.Context, cli *clientv3.Client, tenant, group string) (Map, error) {
	if cli == nil {
		return Map{}, &ConfigError{Field: "client", Reason: "nil *clientv3.Client"}
	}
	if err := checkNames(tenant, group); err != nil {
		return Map{}, err
	}
	return snapshot(ctx, cli, newKeys(tenant, group))
}

func snapshot(ctx context.Context, cli *clientv3.Client, k keys) (Map, error) {
	resp, err := cli.Txn(ctx).Then(
		clientv3.OpGet(k.memberPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(k.target, clientv3.WithPrefix()),
		clientv3.OpGet(k.partitions, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
	).Commit()
	if err != nil {
		return Map{}, fmt.Errorf("ownership: snapshot %s: %w", k.group, etcderr.Classify(err))
	}
	m := Map{Tenant: k.tenant, Group: k.group, Revision: resp.Header.Revision}
	prefix := k.memberPrefix()
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		id := string(kv.Key[len(prefix):])
		mi := MemberInfo{ID: id}
		if _, md, ok := membership.DecodeRecord(kv.Value); ok {
			mi.Metadata = md
		}
		m.Members = append(m.Members, mi)
	}
	t, rev, found, err := readTarget(resp.Responses[1].GetResponseRange().Kvs, k.target)
	if found {
		m.TargetRevision = rev
		if err != nil {
			return Map{}, fmt.Errorf("ownership: snapshot %s: %w", k.group, err)
		}
	}
	m.Partitions = t.Partitions
	m.Owners = make([]Assignment, t.Partitions)
	for i := range m.Owners {
		m.Owners[i] = Assignment{Partition: i, Target: t.Owners[i]}
	}
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs { // oldest first
		p, member, ok := k.parsePartitionKey(string(kv.Key), t.Partitions)
		if !ok {
			continue
		}
		a := &m.Owners[p]
		if a.Owner == "" {
			a.Owner, a.Revision = member, kv.CreateRevision
		} else {
			a.Waiting++
		}
	}
	return m, nil
}

// Observe reports a group's map and every change of it: the first Map is the
// current one (Snapshot); after each batch of changes to the member keys, the
// target or the partition keys it reads the map again (watch, then read; a
// burst of changes costs one read per batch). It follows those keys through
// the client's watch plane (no etcd watch of its own). The channel holds only
// the newest Map (a slow reader skips intermediate ones, never the latest) and
// is closed when ctx ends (or the client is closed); a failed read is retried
// with backoff. It blocks only for the first read, bounded by ctx, and returns
// its error.
func Observe(ctx context.Context, cli *clientv3.Client, tenant, group string) (<-chan Map, error) {
	first, err := Snapshot(ctx, cli, tenant, group)
	if err != nil {
		return nil, err
	}
	k := newKeys(tenant, group)
	plane := watchplane.For(cli, nil)
	var subs []*watchplane.Sub
	for _, spec := range []watchplane.Spec{
		{Key: k.memberPrefix(), Prefix: true}, {Key: k.target, Prefix: true}, {Key: k.partitions, Prefix: true},
	} {
		spec.From = first.Revision + 1
		sub, err := plane.Subscribe(spec)
		if err != nil {
			for _, s := range subs {
				s.Close()
			}
			return nil, fmt.Errorf("ownership: observe %s: %w", group, err)
		}
		subs = append(subs, sub)
	}
	ch := make(chan Map, 1)
	ch <- first
	go observe(ctx, cli, k, subs, ch)
	return ch, nil
}

func observe(ctx context.Context, cli *clientv3.Client, k keys, subs []*watchplane.Sub, ch chan Map) {
	defer close(ch)
	defer func() {
		for _, s := range subs {
			s.Close()
		}
	}()
	backoff := coord.Backoff{Base: 50 * time.Millisecond, Cap: time.Second}
	for attempt := 0; ; {
		changed := false
		for _, s := range subs {
			changed = drain(s, nil) || changed
		}
		if !changed && attempt == 0 {
			select {
			case <-ctx.Done():
				return
			case <-subs[0].Done():
				return
			case <-subs[0].Ready():
			case <-subs[1].Ready():
			case <-subs[2].Ready():
			}
			continue
		}
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := snapshot(rctx, cli, k)
		rcancel()
		if err != nil {
			if backoff.Wait(ctx, coord.SystemClock(), attempt) != nil {
				return
			}
			attempt++
			continue
		}
		attempt = 0
		select { // newest only
		case <-ch:
		default:
		}
		ch <- m
	}
}
