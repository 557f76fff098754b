package failstatic

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/internal/etcderr"
)

// probeLoop confirms, every ProbeInterval, that the cache is current. It is
// independent of the watch stream: a hung watch leaves the cache unconfirmed.
func (c *Cache[T]) probeLoop(ctx context.Context) {
	t := c.clock.NewTimer(c.cfg.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if err := c.probe(ctx); err != nil && ctx.Err() == nil {
			c.log.Debug("staleness probe failed", "err", err)
		}
		t.Reset(c.cfg.ProbeInterval)
	}
}

// probe does one linearizable read of the key or prefix — keys only, the count
// and the highest mod revision — and confirms the cache current as of the moment
// the read was sent when either the watch has applied everything up to the
// read's revision, or the observed state has the same key count and highest mod
// revision (which, for states of one key space at two revisions, implies they
// are equal: any put after the older one raises the highest mod revision and a
// pure delete lowers the count).
func (c *Cache[T]) probe(ctx context.Context) error {
	sent := c.clock.Now()
	rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithKeysOnly()}
	if c.isPrefix {
		opts = append(opts, clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend), clientv3.WithLimit(1))
	}
	resp, err := c.client.Get(clientv3.WithRequireLeader(rctx), c.watched, opts...)
	if err != nil {
		return fmt.Errorf("failstatic: probe %q: %w", c.watched, etcderr.Classify(err))
	}
	var maxMod int64
	if len(resp.Kvs) > 0 {
		maxMod = resp.Kvs[0].ModRevision
	}
	if o := c.observed.Load(); o != nil &&
		(o.rev >= resp.Header.Revision || (o.count == resp.Count && o.maxMod == maxMod)) {
		c.confirm(sent)
	}
	return nil
}
