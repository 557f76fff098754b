package correctnesslease

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/etcderr"
	"github.com/coordkit/coordkit/internal/watchplane"
)

// Observation is the holder of a lease at one etcd revision.
type Observation struct {
	// Key is the holder's etcd key; "" when nobody holds the lease.
	Key string
	// TokenRevision is the create revision of the holder's key: the revision its
	// token carries. 0 when nobody holds the lease.
	TokenRevision int64
	// Revision is the etcd revision at which the holder was read.
	Revision int64
}

// Held reports whether someone held the lease at o.Revision.
func (o Observation) Held() bool { return o.Key != "" }

// Observe reports the holder of lease name in tenant and every change of holder,
// including "no holder" (an Observation with Held() false). The first
// Observation is the current state. It follows the election prefix through the
// client's watch plane (no etcd watch of its own: one per tenant's elections
// for the whole process) and derives the holder — the oldest key, by create
// revision — at every revision from the keys' state: one linearizable read of
// the keys, then every change in order, so a term that began and ended inside a
// burst of changes is reported too. After a compaction it starts again from
// the plane's re-list.
//
// Observe blocks only for the first, linearizable read (bounded by ctx) and
// returns its error, matching coord.ErrNoLeader when etcd has no leader;
// invalid names return *coord.NameError. The channel is closed when ctx ends
// (or the client is closed); cancel ctx to stop the goroutine. Observation does
// not confer authority and carries no token.
func Observe(ctx context.Context, cli *clientv3.Client, tenant, name string) (<-chan Observation, error) {
	prefix, err := coord.Key(tenant, coord.KindElections, name)
	if err != nil {
		return nil, err
	}
	// The first read is the caller's own (linearizable, bounded by ctx: its
	// error says what etcd said); the plane follows from the revision after it.
	resp, err := cli.Get(clientv3.WithRequireLeader(ctx), prefix+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("correctnesslease: observe %s: %w", prefix, etcderr.Classify(err))
	}
	o := &observer{prefix: prefix, keys: map[string]int64{}}
	for _, kv := range resp.Kvs {
		o.keys[string(kv.Key)] = kv.CreateRevision
	}
	sub, err := watchplane.For(cli, nil).Subscribe(watchplane.Spec{Key: prefix + "/", Prefix: true,
		From: resp.Header.Revision + 1, Backoff: coord.Backoff{Base: 50 * time.Millisecond, Cap: 5 * time.Second}})
	if err != nil {
		return nil, fmt.Errorf("correctnesslease: observe %s: %w", prefix, err)
	}
	first := o.holder(resp.Header.Revision)
	ch := make(chan Observation, 1)
	ch <- first
	o.last = first
	go o.run(ctx, sub, ch)
	return ch, nil
}

// observer derives the holder of one election from its keys.
type observer struct {
	prefix string
	keys   map[string]int64 // key -> create revision
	last   Observation
}

// holder is the oldest key, by create revision, at revision rev.
func (o *observer) holder(rev int64) Observation {
	h := Observation{Revision: rev}
	for k, create := range o.keys {
		if h.Key == "" || create < h.TokenRevision {
			h.Key, h.TokenRevision = k, create
		}
	}
	return h
}

// apply applies one update; emit, if not nil, is called with the holder after
// each revision of its events (the events of one transaction together).
func (o *observer) apply(u watchplane.Update, emit func(Observation) bool) bool {
	if u.Resync {
		clear(o.keys)
		for _, kv := range u.KVs {
			o.keys[string(kv.Key)] = kv.CreateRevision
		}
		if emit != nil && !emit(o.holder(u.Revision)) {
			return false
		}
	}
	for i, ev := range u.Events {
		if ev.Type == clientv3.EventTypeDelete {
			delete(o.keys, string(ev.Kv.Key))
		} else {
			o.keys[string(ev.Kv.Key)] = ev.Kv.CreateRevision
		}
		rev := ev.Kv.ModRevision
		if i+1 < len(u.Events) && u.Events[i+1].Kv.ModRevision == rev {
			continue // the same transaction: one holder after its last event
		}
		if emit != nil && !emit(o.holder(rev)) {
			return false
		}
	}
	return true
}

func (o *observer) run(ctx context.Context, sub *watchplane.Sub, ch chan<- Observation) {
	defer close(ch)
	defer sub.Close()
	emit := func(h Observation) bool {
		if h.Key == o.last.Key && h.TokenRevision == o.last.TokenRevision {
			return true
		}
		o.last = h
		select {
		case ch <- h:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.Done():
			return
		case <-sub.Ready():
		}
		for u, ok := sub.Take(); ok; u, ok = sub.Take() {
			if !o.apply(u, emit) {
				return
			}
		}
	}
}
