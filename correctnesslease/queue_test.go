package correctnesslease

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// A queue transaction that finds the session's member key rewritten (another
// Acquire's fence on this session moved the guard) and no key of ours wrote
// nothing: Acquire raises its guard and queues again, and gets the lease.
func TestQueueAfterAFenceElsewhereOnTheSessionQueuesAgain(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := newSession(t, cli, Config{Tenant: coordtest.Tenant(t), TTL: 10 * time.Second})
	// What a fence does to the member key, behind the session's guard.
	fence, err := cli.Put(ctx, s.member, s.memberValue, clientv3.WithLease(s.id))
	if err != nil {
		t.Fatal(err)
	}
	if g := s.guard.Load(); g >= fence.Header.Revision {
		t.Fatalf("guard %d already at the rewrite's revision %d", g, fence.Header.Revision)
	}
	l, err := Acquire(ctx, s, "job")
	if err != nil {
		t.Fatalf("Acquire after the member key was rewritten: %v", err)
	}
	defer l.Release(context.Background())
	if g := s.guard.Load(); g != fence.Header.Revision {
		t.Fatalf("guard %d, want the member key's new mod revision %d", g, fence.Header.Revision)
	}
	resp, err := cli.Get(ctx, l.Key())
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != l.Token().Revision() || l.Token().Revision() <= fence.Header.Revision {
		t.Fatalf("key %s in etcd: %v (%v); want one created after the rewrite (revision %d) at the token %s", l.Key(), resp.Kvs, err, fence.Header.Revision, l.Token())
	}
}

// hangingTxn counts the client's Txns: the refuse-th fails at once without being
// sent (a transaction that got no answer), the hold-th is held until the call's
// context ends, as by an etcd that does not answer; every other one goes to etcd.
// held receives how far off the held call's deadline was when it was sent (-1
// without a deadline).
type hangingTxn struct {
	refuse, hold int64
	txns         atomic.Int64
	held         chan time.Duration
}

func (h *hangingTxn) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method == "/etcdserverpb.KV/Txn" {
		switch h.txns.Add(1) {
		case h.refuse:
			return status.Error(codes.Internal, "injected: no answer to the transaction")
		case h.hold:
			left := time.Duration(-1)
			if d, ok := ctx.Deadline(); ok {
				left = time.Until(d)
			}
			h.held <- left
			<-ctx.Done()
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// hangingTxnClient returns a client of e whose Txns go through h.
func hangingTxnClient(t *testing.T, e *coordtest.EtcdServer, h *hangingTxn) *clientv3.Client {
	t.Helper()
	h.held = make(chan time.Duration, 1)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   e.Endpoints,
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(h.unary)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// When etcd does not answer the fence of a queue transaction of unknown outcome,
// Acquire gives up on it after TTL/3 (its documented bound: the fence is retried
// in the background) rather than blocking its caller, and the name is free again
// once a retry has landed. Its error is the transaction's: the caller's context is
// live, so it is no loss of authority by cancellation.
func TestFenceAttemptIsBoundedByAThirdOfTheTTL(t *testing.T) {
	e := coordtest.Etcd(t)
	h := &hangingTxn{refuse: 1, hold: 2} // the queue transaction, then its fence
	s := newSession(t, hangingTxnClient(t, e, h), Config{Tenant: coordtest.Tenant(t), TTL: testTTL})
	bound := testTTL / 3

	start := time.Now()
	_, err := Acquire(context.Background(), s, "job")
	took := time.Since(start)
	if err == nil || errors.Is(err, ErrAlreadyQueued) {
		t.Fatalf("Acquire whose queue transaction got no answer: %v, want its error", err)
	}
	if r := lossReason(err); r != "" {
		t.Fatalf("Acquire with a live context, its queue transaction unanswered: %v, a loss of authority (%s); want the transaction's error alone", err, r)
	}
	left := coordtest.Recv(t, h.held, time.Second, "the fence call (it was sent before Acquire returned)")
	if left <= 0 || left > bound {
		t.Fatalf("fence call sent with %v left before its deadline, want at most TTL/3 = %v", left, bound)
	}
	if took > testTTL {
		t.Fatalf("Acquire returned %v after a fence etcd never answered, want about TTL/3 = %v", took, bound)
	}

	// The background retry lands: the name can be queued again on this session.
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := Acquire(context.Background(), s, "job")
		if err == nil {
			_ = l.Release(context.Background())
			break
		}
		if !errors.Is(err, ErrAlreadyQueued) || time.Now().After(deadline) {
			t.Fatalf("Acquire after the fence's retry: %v (after %d Txns)", err, h.txns.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A TryAcquire that finds the lease held removes its own key again; when etcd
// does not answer that delete, TryAcquire gives up on it after TTL/3 (the
// cleanup is retried in the background) and returns ErrHeld, and the retry
// removes the key.
func TestCleanupAttemptIsBoundedByAThirdOfTheTTL(t *testing.T) {
	e := coordtest.Etcd(t)
	other := e.Client(t)
	tenant := coordtest.Tenant(t)
	holder := newSession(t, other, Config{Tenant: tenant, TTL: testTTL})
	h := &hangingTxn{hold: 2} // the queue transaction goes through, the cleanup's delete hangs
	s := newSession(t, hangingTxnClient(t, e, h), Config{Tenant: tenant, TTL: testTTL})
	bound := testTTL / 3
	ctx := context.Background()
	held, err := Acquire(ctx, holder, "job")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)

	start := time.Now()
	_, err = TryAcquire(ctx, s, "job")
	took := time.Since(start)
	if !errors.Is(err, ErrHeld) {
		t.Fatalf("TryAcquire while held: %v, want ErrHeld", err)
	}
	left := coordtest.Recv(t, h.held, time.Second, "the cleanup's delete (it was sent before TryAcquire returned)")
	if left <= 0 || left > bound {
		t.Fatalf("cleanup delete sent with %v left before its deadline, want at most TTL/3 = %v", left, bound)
	}
	if took > testTTL {
		t.Fatalf("TryAcquire returned %v after a delete etcd never answered, want about TTL/3 = %v", took, bound)
	}
	waitKeys(t, other, held.Token().Lease()+"/", 1) // the retry removed TryAcquire's key
}
