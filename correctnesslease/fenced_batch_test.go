package correctnesslease

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// gatedQueues holds the first queue transaction of n keys (n+1 compares: the
// session's guard and each key's absence) until its gate is opened.
type gatedQueues struct {
	held  [3]atomic.Bool // by key count, 1 and 2
	sent  [3]chan struct{}
	gates [3]chan struct{}
}

func (g *gatedQueues) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if r, ok := req.(*etcdserverpb.TxnRequest); ok && method == "/etcdserverpb.KV/Txn" {
		if n := len(r.Compare) - 1; n >= 1 && n <= 2 && len(r.Success) == 2*n && g.held[n].CompareAndSwap(false, true) {
			close(g.sent[n])
			<-g.gates[n]
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// An Acquire abandoned while its key waits in a group commit is fenced (its
// key deleted, the session's guard moved); when that batch's transaction then
// fails on the moved guard, the batch is queued again for the Acquires still
// waiting — never for the fenced one, whose key would be created after its
// fence, owned by no Lease, and stand in the queue (or at its head, holding
// the name from every other session) until the session ends. Seen as an
// ownership partition held by a member that never acquired it, in the
// full-size scenario (TestOwnershipUnderFaults) after a member was killed.
func TestFencedAcquireIsNotQueuedAgainWithItsBatch(t *testing.T) {
	e := coordtest.Etcd(t)
	g := &gatedQueues{}
	for i := range g.sent {
		g.sent[i], g.gates[i] = make(chan struct{}), make(chan struct{})
	}
	cli := interceptedClient(t, e, g.unary)
	tenant := coordtest.Tenant(t)
	s := newSession(t, cli, Config{Tenant: tenant, TTL: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	type result struct {
		l   *Lease
		err error
	}
	acquire := func(ctx context.Context, name string) chan result {
		ch := make(chan result, 1)
		go func() {
			l, err := Acquire(ctx, s, name)
			ch <- result{l, err}
		}()
		return ch
	}
	// "a" alone in flight, held; "b" and "c" wait for the next batch.
	a := acquire(ctx, "a")
	coordtest.Recv(t, g.sent[1], 5*time.Second, "a's queue transaction sent")
	bctx, bcancel := context.WithCancel(ctx)
	b, c := acquire(bctx, "b"), acquire(ctx, "c")
	coordtest.Until(t, 5*time.Second, 5*time.Millisecond, "b and c pending in the group commit", func() bool {
		s.queues.mu.Lock()
		defer s.queues.mu.Unlock()
		return len(s.queues.pending) == 2
	})
	close(g.gates[1])
	if r := coordtest.Recv(t, a, 5*time.Second, "a acquired"); r.err != nil {
		t.Fatalf("Acquire a: %v", r.err)
	}
	// b and c's batch is sent and held; b gives up and is fenced meanwhile.
	coordtest.Recv(t, g.sent[2], 5*time.Second, "b and c's queue transaction sent")
	bcancel()
	if r := coordtest.Recv(t, b, 5*time.Second, "b's Acquire returning after its context ended"); r.err == nil {
		t.Fatal("Acquire b with its context cancelled mid-queue succeeded")
	}
	fenced := s.fencedKeys.Load()
	guard := s.guard.Load()
	close(g.gates[2]) // the batch reaches etcd after b's fence: the guard has moved
	rc := coordtest.Recv(t, c, 5*time.Second, "c acquired")
	if rc.err != nil {
		t.Fatalf("Acquire c: %v", rc.err)
	}
	if rc.l.Token().Revision() <= guard {
		t.Fatalf("c's token %s is not after b's fence (guard %d): the batch did not meet the moved guard, the test proves nothing", rc.l.Token(), guard)
	}
	prefix, err := coord.Key(tenant, coord.KindElections, "b")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, s.keyFor(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Fatalf("b's key %s exists (created at %d, after its fence; %d keys fenced): queued again with its batch after it was fenced, it belongs to no Lease",
			s.keyFor(prefix), resp.Kvs[0].CreateRevision, fenced)
	}
}
