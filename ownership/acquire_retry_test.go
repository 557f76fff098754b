package ownership_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestFailedAcquireBacksOff: a member given a partition queues behind a holder
// outside the group, and its queued key is deleted every time it appears, so
// every acquisition fails. The member retries while the partition is its own,
// with a backoff that grows to a second: in 6 s it queues at most ~15 times
// (30 is far beyond what the backoff allows), not once per round trip (a
// failure that ends the slot and starts it again, or returns before the
// backoff, retries at the speed of etcd: a write storm on the tenant).
func TestFailedAcquireBacksOff(t *testing.T) {
	const window = 6 * time.Second
	g, cli, tenant := newGroup(t, ownership.Config{Partitions: 1})
	prefix := "/tenants/" + tenant + "/elections/" + ownership.LeaseName("orders", 0) + "/"
	actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	holder, err := correctnesslease.Acquire(actx, newSession(t, cli, tenant), ownership.LeaseName("orders", 0))
	if err != nil {
		t.Fatalf("Acquire by the holder outside the group: %v", err)
	}
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	wch := cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(holder.Token().Revision()+1))
	b := join(t, g, cli, tenant, 0)
	end := time.After(window)
	attempts := 0
	for done := false; !done; {
		select {
		case <-end:
			done = true
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil {
				t.Fatalf("watch of the partition's queue ended: %v", wr.Err())
			}
			for _, ev := range wr.Events {
				if ev.Type != clientv3.EventTypePut || ev.Kv.CreateRevision == holder.Token().Revision() {
					continue
				}
				attempts++
				dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := cli.Delete(dctx, string(ev.Kv.Key))
				dcancel()
				if err != nil {
					t.Fatalf("delete of the member's queued key: %v", err)
				}
			}
		}
	}
	if len(b.m.Owned()) != 0 {
		t.Fatalf("the member holds %v while the partition is held outside the group", owned(b.m))
	}
	if attempts < 3 {
		t.Fatalf("the member queued %d times in %v: it stopped retrying a partition it was given", attempts, window)
	}
	if attempts > 30 {
		t.Fatalf("the member queued %d times in %v: its failed acquisitions are retried without the backoff", attempts, window)
	}
	t.Logf("%d acquisitions in %v", attempts, window)
}

// TestQueuedKeyFreesTheAcquisitionSlot: with MaxAcquiring 1, a member given 4
// partitions held outside the group queues one at a time, each giving its slot
// back the moment its key is seen in etcd (the partitions watch): all 4 keys are
// queued within a fraction of a second. Without that signal each would keep the
// slot until the fallback of a third of the session's TTL (here 3 s each).
func TestQueuedKeyFreesTheAcquisitionSlot(t *testing.T) {
	const p = 4
	g, cli, tenant := newGroup(t, ownership.Config{Partitions: p, MaxAcquiring: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	holder := newSession(t, cli, tenant)
	for i := range p {
		if _, err := correctnesslease.Acquire(ctx, holder, ownership.LeaseName("orders", i)); err != nil {
			t.Fatalf("Acquire of partition %d outside the group: %v", i, err)
		}
	}
	s := ownership.NewTestSession(t, cli, tenant, 9*time.Second)
	start := time.Now()
	m, err := g.Join(ctx, s, nil)
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	go func() {
		for range m.Events() {
		}
	}()
	coordtest.Until(t, 3*time.Second, 10*time.Millisecond, "the member's keys queued for all 4 partitions", func() bool {
		return keys(t, cli, "/tenants/"+tenant+"/elections/ownership.orders.") == 2*p
	})
	t.Logf("4 keys queued one at a time in %v", time.Since(start))
}
