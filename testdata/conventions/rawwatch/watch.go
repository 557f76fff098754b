// Package rawwatch is a fixture: a feature package that watches etcd itself
// instead of through internal/watchplane. checkWatches must catch both calls.
package rawwatch

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

type thing struct{ cli *clientv3.Client }

// Follow watches a key the way the SDK no longer does.
func (t *thing) Follow(ctx context.Context) clientv3.WatchChan {
	_ = t.cli.RequestProgress(ctx)
	return t.cli.Watch(ctx, "/tenants/t/config/x")
}
