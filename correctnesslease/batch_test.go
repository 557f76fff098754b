package correctnesslease

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestConcurrentAcquiresShareQueueTransactions: 256 Acquires started at once on
// one session queue their keys in a handful of transactions (a group commit,
// up to 64 keys each), not one each — a member given many partitions at once —
// and every one holds its own lease with its own key as its token; 256
// Releases at once delete the keys in a handful of transactions too.
func TestConcurrentAcquiresShareQueueTransactions(t *testing.T) {
	e := coordtest.Etcd(t)
	cli, rpcs := coordtest.CountingEtcdClient(t, e.Endpoints...)
	s := newSession(t, cli, Config{Tenant: coordtest.Tenant(t), TTL: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 256
	before := rpcs.Count("/Txn")
	leases := make([]*Lease, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := Acquire(ctx, s, fmt.Sprintf("p%d", i))
			leases[i] = l
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	txns := rpcs.Count("/Txn") - before
	t.Logf("%d Acquires: %d queue transactions", n, txns)
	if txns > n/8 {
		t.Fatalf("%d Acquires sent %d transactions: their queue transactions were not committed together", n, txns)
	}
	for i, l := range leases {
		if l.Err() != nil || l.Name() != fmt.Sprintf("p%d", i) || l.Token().Revision() == 0 {
			t.Fatalf("lease %d: %v %s %v", i, l.Err(), l.Name(), l.Token())
		}
	}
	before = rpcs.Count("/Txn")
	errs = make(chan error, n)
	for _, l := range leases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Release(ctx); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	txns = rpcs.Count("/Txn") - before
	t.Logf("%d Releases: %d delete transactions", n, txns)
	if txns > n/8 {
		t.Fatalf("%d Releases sent %d transactions: their deletes were not committed together", n, txns)
	}
	waitKeys(t, cli, rootOf(t, s.Tenant()), 0)
}

// TestBatchedReleaseWithAStaleTermDeletesOnlyItsOwn: Releases committed
// together where one is a late Release of an old term whose key now belongs to
// a newer term (etcd#22082): the batch cannot apply as one, every key is then
// deleted by its own guarded transaction — the others' keys go, the newer
// term's key stays.
func TestBatchedReleaseWithAStaleTermDeletesOnlyItsOwn(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := newSession(t, cli, Config{Tenant: coordtest.Tenant(t), TTL: 10 * time.Second})
	old := mustAcquire(ctx, t, s, "job")
	if _, err := cli.Delete(ctx, old.Key()); err != nil { // the old term ends behind its back
		t.Fatal(err)
	}
	coordtest.Recv(t, old.Context().Done(), 10*time.Second, "the old term's context")
	cur := mustAcquire(ctx, t, s, "job")
	var others []*Lease
	for i := range 8 {
		l, err := Acquire(ctx, s, fmt.Sprintf("other%d", i))
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, l)
	}
	// One batch, as the group commit sends it when these Releases meet.
	for i, err := range s.deleteKeys(ctx, append([]*Lease{old}, others...)) {
		if err != nil {
			t.Fatalf("delete %d: %v", i, err)
		}
	}
	kv, err := cli.Get(ctx, cur.Key())
	if err != nil || len(kv.Kvs) != 1 || kv.Kvs[0].CreateRevision != cur.Token().Revision() || cur.Err() != nil {
		t.Fatalf("the newer term's key after a batched Release with the old term: %v %v (lease %v)", kv, err, cur.Err())
	}
	for _, l := range others {
		if kv, err := cli.Get(ctx, l.Key()); err != nil || len(kv.Kvs) != 0 {
			t.Fatalf("%s not deleted by its Release: %v %v", l.Key(), kv, err)
		}
	}
	if err := cur.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
