package correctnesslease

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// endingWatcher is a clientv3.Watcher that ends the next ends watches of key the
// way etcd ends a compacted watch: one response carrying ErrCompacted, then a
// closed channel. It runs before (if set) before ending the first. Every other
// watch goes to etcd; rewatched receives the start revision of each of those on
// key.
type endingWatcher struct {
	clientv3.Watcher
	key       string
	ends      atomic.Int64
	before    func()
	ended     atomic.Bool
	rewatched chan int64
}

// newEndingWatcher wraps cli's watcher, ending the first ends watches of key
// (set key before the first watch).
func newEndingWatcher(cli *clientv3.Client, ends int64) *endingWatcher {
	w := &endingWatcher{Watcher: cli.Watcher, rewatched: make(chan int64, 4)}
	w.ends.Store(ends)
	return w
}

func (w *endingWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	if key == w.key {
		if w.ends.Add(-1) >= 0 {
			if w.ended.CompareAndSwap(false, true) && w.before != nil {
				w.before()
			}
			rev := clientv3.OpGet(key, opts...).Rev()
			ch := make(chan clientv3.WatchResponse, 1)
			ch <- clientv3.WatchResponse{Header: &etcdserverpb.ResponseHeader{Revision: rev}, CompactRevision: rev}
			close(ch)
			return ch
		}
		select {
		case w.rewatched <- clientv3.OpGet(key, opts...).Rev():
		default:
		}
	}
	return w.Watcher.Watch(ctx, key, opts...)
}

// failingGet is a clientv3.KV whose first fail Gets of key fail without being
// sent (failed counts them); everything else goes to etcd.
type failingGet struct {
	clientv3.KV
	key    string
	fail   atomic.Int64
	failed atomic.Int64
}

func (f *failingGet) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if key == f.key && f.fail.Add(-1) >= 0 {
		f.failed.Add(1)
		return nil, errors.New("injected: etcd unreachable for a Get")
	}
	return f.KV.Get(ctx, key, opts...)
}

// rootOf is the watch plane's root of a tenant's elections: the one upstream
// watch every lease and waiter of the tenant follows its key through.
func rootOf(t testing.TB, tenant string) string {
	t.Helper()
	p, err := coord.Prefix(tenant, coord.KindElections)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// When the watch plane's upstream watch ends with a compaction, the plane
// re-lists and the lease checks its key in the resync: an unchanged key keeps
// the lease and a later deletion is still seen; a key deleted or overwritten
// meanwhile is a loss (LossKeyDeleted); a re-list that fails is retried, and the
// watch goes on.
func TestKeyResyncChecksTheKey(t *testing.T) {
	e := coordtest.Etcd(t)
	other := e.Client(t)
	for _, c := range []struct {
		name     string
		meantime func(ctx context.Context, key string) error // while the watch is down
		failGets int64
		lost     bool // the resync itself finds the lease lost
	}{
		{name: "unchanged"},
		{name: "re-list fails once", failGets: 1},
		{name: "deleted meanwhile", lost: true, meantime: func(ctx context.Context, key string) error {
			_, err := other.Delete(ctx, key)
			return err
		}},
		{name: "overwritten meanwhile", lost: true, meantime: func(ctx context.Context, key string) error {
			_, err := other.Put(ctx, key, "intruder")
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			tenant := coordtest.Tenant(t)
			cli := coordtest.NewEtcdClient(t, e.Endpoints...)
			w := newEndingWatcher(cli, 1)
			w.key = rootOf(t, tenant)
			// key set now (Gets of it fail only once fail is stored): the
			// plane's probe reads it from its own goroutine.
			kv := &failingGet{KV: cli.KV, key: w.key}
			cli.Watcher, cli.KV = w, kv // before the session starts: nothing else uses the client yet
			s := newSession(t, cli, Config{Tenant: tenant, TTL: 10 * time.Second})
			prefix, err := coord.Key(s.cfg.Tenant, coord.KindElections, "job")
			if err != nil {
				t.Fatal(err)
			}
			key := s.keyFor(prefix)
			meantimeErr := make(chan error, 1)
			w.before = func() { // the first list has been read: fail the re-list
				kv.fail.Store(c.failGets)
				if c.meantime != nil {
					meantimeErr <- c.meantime(ctx, key)
				}
			}
			l, err := Acquire(ctx, s, "job")
			if c.meantime != nil {
				if err := coordtest.Recv(t, meantimeErr, 10*time.Second, "the change while the watch was down"); err != nil {
					t.Fatal(err)
				}
			}
			if c.lost {
				// The key is followed before Acquire returns: Acquire may report the loss itself.
				if err == nil {
					defer l.Release(context.Background())
					coordtest.Recv(t, l.Context().Done(), 10*time.Second, "the lease whose key changed while its watch was down")
					err = l.Err()
				}
				if r := lossReason(err); r != coord.LossKeyDeleted {
					t.Fatalf("lease lost with %v, want %s", err, coord.LossKeyDeleted)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(context.Background())
			from := coordtest.Recv(t, w.rewatched, 10*time.Second, "the plane watching the elections again after the compaction")
			if from <= l.Token().Revision() {
				t.Fatalf("root watched again from revision %d, want after the key's creation at %d", from, l.Token().Revision())
			}
			if n := kv.fail.Load(); n > 0 {
				t.Fatalf("%d injected Get failures left: the root was not re-listed", n)
			}
			if c.failGets > 0 && kv.failed.Load() != c.failGets {
				t.Fatalf("%d re-lists failed, want %d", kv.failed.Load(), c.failGets)
			}
			if err := l.Err(); err != nil {
				t.Fatalf("lease lost after a resync that found its key unchanged: %v", err)
			}
			if _, err := other.Delete(ctx, l.Key()); err != nil {
				t.Fatal(err)
			}
			coordtest.Recv(t, l.Context().Done(), 10*time.Second, "the lease whose key was deleted after the resync")
			if r := lossReason(l.Err()); r != coord.LossKeyDeleted {
				t.Fatalf("lease lost with %v, want %s", l.Err(), coord.LossKeyDeleted)
			}
		})
	}
}

// When the watch plane's upstream watch ends with a compaction while a waiter
// follows its predecessor, the waiter checks the predecessor in the resync and,
// still there, waits on: it acquires once the predecessor releases, not before.
func TestPredecessorResyncKeepsTheWaiterWaiting(t *testing.T) {
	e := coordtest.Etcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel() // before the sessions close: a waiter still waiting gives up
	tenant := coordtest.Tenant(t)
	holder := newSession(t, e.Client(t), Config{Tenant: tenant, TTL: 10 * time.Second})
	held := mustAcquire(ctx, t, holder, "job")
	cli := coordtest.NewEtcdClient(t, e.Endpoints...)
	w := newEndingWatcher(cli, 1)
	w.key = rootOf(t, tenant)
	cli.Watcher = w // before the session starts: nothing else uses the client yet
	s := newSession(t, cli, Config{Tenant: tenant, TTL: 10 * time.Second})

	acquired := acquireInBackground(ctx, s, "job", held)
	select {
	case <-w.rewatched:
	case err := <-acquired:
		t.Fatalf("the waiter returned (%v) instead of waiting through the resync", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the plane did not watch the elections again after the compaction")
	}
	select {
	case err := <-acquired:
		t.Fatalf("the waiter returned (%v) while its predecessor holds", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := coordtest.Recv(t, acquired, 10*time.Second, "the waiter acquiring after the release"); err != nil {
		t.Fatal(err)
	}
}

// A waiter whose read of the queue fails after its predecessor left retries the
// read: it neither fails nor takes the lease while an earlier request still holds
// it (here the holder, behind a waiter that left), and acquires after the
// holder's release.
func TestWaiterRetriesAFailedReadOfTheQueue(t *testing.T) {
	e := coordtest.Etcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tenant := coordtest.Tenant(t)
	other := e.Client(t)
	cfg := Config{Tenant: tenant, TTL: 10 * time.Second}
	holder, middle := newSession(t, other, cfg), newSession(t, other, cfg)
	held := mustAcquire(ctx, t, holder, "job")
	prefix := held.Token().Lease()
	mctx, mcancel := context.WithCancel(ctx)
	defer mcancel()
	middleDone := acquireInBackground(mctx, middle, "job", nil)
	waitKeys(t, other, prefix+"/", 2)

	h := &hangingTxn{refuse: 2} // its queue transaction goes through, its first read of the queue fails
	cli := hangingTxnClient(t, e, h)
	s := newSession(t, cli, cfg)
	acquired := acquireInBackground(ctx, s, "job", held)
	waitKeys(t, other, prefix+"/", 3)
	mcancel() // the waiter in the middle leaves: the last one reads the queue again
	if err := coordtest.Recv(t, middleDone, 10*time.Second, "the middle waiter leaving"); !errors.Is(err, context.Canceled) {
		t.Fatalf("middle waiter: %v", err)
	}
	coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "the failed read of the queue retried (3 Txns)", func() bool { return h.txns.Load() >= 3 })
	select {
	case err := <-acquired:
		t.Fatalf("the waiter returned (%v) after a failed read of the queue", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := coordtest.Recv(t, acquired, 10*time.Second, "the waiter acquiring after the release"); err != nil {
		t.Fatal(err)
	}
}
