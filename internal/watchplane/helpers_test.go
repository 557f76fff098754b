package watchplane

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counting wraps a client's KV and Watcher (the exported fields every call goes
// through) and counts what reaches etcd.
type counting struct {
	clientv3.KV
	clientv3.Watcher
	gets, watches, progress atomic.Int64
	fullReads               atomic.Int64 // reads that are not count-only
	timedOut                atomic.Int64 // reads that ran out of their context's time
	// hang, while set, makes Watch return a channel that never delivers (a
	// silent stream): etcd answers reads, the watch says nothing.
	hang atomic.Bool
	mu   sync.Mutex
	hung []chan clientv3.WatchResponse
}

func count(cli *clientv3.Client) *counting {
	c := &counting{KV: cli.KV, Watcher: cli.Watcher}
	cli.KV, cli.Watcher = c, c
	return c
}

func (c *counting) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	c.gets.Add(1)
	if !clientv3.OpGet(key, opts...).IsCountOnly() {
		c.fullReads.Add(1)
	}
	resp, err := c.KV.Get(ctx, key, opts...)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		c.timedOut.Add(1)
	}
	return resp, err
}

func (c *counting) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	c.watches.Add(1)
	if c.hang.Load() {
		ch := make(chan clientv3.WatchResponse)
		c.mu.Lock()
		c.hung = append(c.hung, ch)
		c.mu.Unlock()
		go func() { <-ctx.Done(); close(ch) }()
		return ch
	}
	return c.Watcher.Watch(ctx, key, opts...)
}

func (c *counting) RequestProgress(ctx context.Context) error {
	c.progress.Add(1)
	return c.Watcher.RequestProgress(ctx)
}

// serverWatchers reads etcd's own gauge of its watchers from /metrics. Several
// embedded servers of one test process share the gauge: compare differences.
func serverWatchers(t *testing.T, endpoint string) int {
	t.Helper()
	v, ok, err := coordtest.EtcdMetric(endpoint, "etcd_debugging_mvcc_watcher_total")
	if err != nil || !ok {
		t.Fatalf("etcd_debugging_mvcc_watcher_total of %s: found %v, %v", endpoint, ok, err)
	}
	return int(v)
}

func put(t *testing.T, cli *clientv3.Client, key, val string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Put(ctx, key, val)
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return resp.Header.Revision
}

func del(t *testing.T, cli *clientv3.Client, key string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Delete(ctx, key)
	if err != nil {
		t.Fatalf("delete %s: %v", key, err)
	}
	return resp.Header.Revision
}

// next takes the next Update within 10 s or fails saying what did not come.
func next(t *testing.T, s *Sub, what string) Update {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("no update within 10 s: %s: %v", what, err)
	}
	return u
}

// collect takes updates until the subscriber has been given everything up to
// revision rev, and returns the events (a resync as its state, as puts).
func collect(t *testing.T, s *Sub, rev int64, what string) []string {
	t.Helper()
	var out []string
	deadline := time.After(10 * time.Second)
	for {
		// Every event up to Revision was queued before Revision moved: once it
		// has reached rev, what Take returns next is all that is left.
		reached := s.Revision() >= rev
		for {
			u, ok := s.Take()
			if !ok {
				break
			}
			if u.Resync {
				out = append(out, "resync@"+strconv.FormatInt(u.Revision, 10))
				for _, kv := range u.KVs {
					out = append(out, "PUT "+string(kv.Key)+"="+string(kv.Value))
				}
			}
			for _, ev := range u.Events {
				out = append(out, ev.Type.String()+" "+string(ev.Kv.Key)+"="+string(ev.Kv.Value))
			}
		}
		if reached {
			return out
		}
		select {
		case <-s.Ready():
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("not given revision %d within 10 s (at %d): %s; got %q", rev, s.Revision(), what, out)
		}
	}
}

func newEtcd(t *testing.T) (*coordtest.EtcdServer, *clientv3.Client) {
	e := coordtest.Etcd(t)
	return e, e.Client(t)
}

func tenantPrefix(t *testing.T) string {
	return "/tenants/" + strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()) + "/"
}
