package correctnesslease

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/etcderr"
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
// Observation is the current state. It watches the election prefix and, after
// each change, reads the holder at that revision (watch, then read). Errors while
// watching are retried with backoff; after a compaction it re-reads.
//
// Observe blocks only for the first read (bounded by ctx) and returns its error,
// matching coord.ErrNoLeader when etcd has no leader; invalid names return
// *coord.NameError. The channel is closed when ctx ends;
// cancel ctx to stop the goroutine. Observation does not confer authority and
// carries no token.
func Observe(ctx context.Context, cli *clientv3.Client, tenant, name string) (<-chan Observation, error) {
	prefix, err := coord.Key(tenant, coord.KindElections, name)
	if err != nil {
		return nil, err
	}
	first, err := readHolder(clientv3.WithRequireLeader(ctx), cli, prefix, 0)
	if err != nil {
		return nil, fmt.Errorf("correctnesslease: observe %s: %w", prefix, etcderr.Classify(err))
	}
	ch := make(chan Observation, 1)
	ch <- first
	go observe(ctx, cli, prefix, first, ch)
	return ch, nil
}

func readHolder(ctx context.Context, cli *clientv3.Client, prefix string, rev int64) (Observation, error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1)}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := cli.Get(ctx, prefix+"/", opts...)
	if err != nil {
		return Observation{}, err
	}
	o := Observation{Revision: resp.Header.Revision}
	if rev > 0 {
		o.Revision = rev
	}
	if len(resp.Kvs) > 0 {
		o.Key, o.TokenRevision = string(resp.Kvs[0].Key), resp.Kvs[0].CreateRevision
	}
	return o, nil
}

func observe(ctx context.Context, cli *clientv3.Client, prefix string, last Observation, ch chan<- Observation) {
	defer close(ch)
	backoff := coord.Backoff{Base: 50 * time.Millisecond, Cap: 5 * time.Second}
	for attempt := 0; ctx.Err() == nil; attempt++ {
		wctx, cancel := context.WithCancel(ctx)
		wch := cli.Watch(wctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(last.Revision+1))
		for wr := range wch {
			if wr.Err() != nil {
				break
			}
			// One response may carry many revisions (a catch-up after the watch
			// started behind): read the holder at each of them, so that a term
			// that began and ended inside the batch is reported too.
			failed := false
			for i, ev := range wr.Events {
				rev := ev.Kv.ModRevision
				if i+1 < len(wr.Events) && wr.Events[i+1].Kv.ModRevision == rev {
					continue // the same transaction: read once, after its last event
				}
				o, err := readHolder(ctx, cli, prefix, rev)
				if err != nil {
					failed = true
					break
				}
				attempt = 0
				if o.Key != last.Key || o.TokenRevision != last.TokenRevision {
					select {
					case ch <- o:
					case <-ctx.Done():
						cancel()
						return
					}
				}
				last = o
			}
			if failed {
				break
			}
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		// Compacted or failed: re-read now and watch from there.
		o, err := readHolder(ctx, cli, prefix, 0)
		if err != nil {
			_ = backoff.Wait(ctx, nil, attempt)
			continue
		}
		if o.Key != last.Key || o.TokenRevision != last.TokenRevision {
			select {
			case ch <- o:
			case <-ctx.Done():
				return
			}
		}
		last = o
	}
}
