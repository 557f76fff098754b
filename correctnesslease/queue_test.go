package correctnesslease

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordkit/coordkit/coord"
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
	return interceptedClient(t, e, h.unary)
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
	held := mustAcquire(ctx, t, holder, "job")
	defer held.Release(ctx)

	start := time.Now()
	_, err := TryAcquire(ctx, s, "job")
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

// TestLeftoverKeyIsNeverReused: a key of this session that no Lease owns (written
// by someone else, or left over) is removed and queued again, so the token is a
// fresh create revision — never the leftover's — and it is the create revision
// of the key etcd holds (the queue position everyone else sees).
func TestLeftoverKeyIsNeverReused(t *testing.T) {
	e := coordtest.Etcd(t)
	cli := e.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := newSession(t, cli, Config{Tenant: coordtest.Tenant(t), TTL: 10 * time.Second})
	const name = "job"
	prefix, err := coord.Key(s.cfg.Tenant, coord.KindElections, name)
	if err != nil {
		t.Fatal(err)
	}
	leftover, err := cli.Put(ctx, s.keyFor(prefix), "", clientv3.WithLease(s.id))
	if err != nil {
		t.Fatal(err)
	}
	l, err := Acquire(ctx, s, name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	if got := l.Token().Revision(); got <= leftover.Header.Revision {
		t.Fatalf("token revision %d, leftover key written at %d: the leftover key was reused", got, leftover.Header.Revision)
	}
	// The token is the create revision of the key etcd holds for the lease.
	resp, err := cli.Get(ctx, l.Key())
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != l.Token().Revision() {
		t.Fatalf("key %s in etcd: %v (%v); want create revision %d, the token", l.Key(), resp.Kvs, err, l.Token().Revision())
	}
}

// TestCloseDoesNotWaitForAQueuingAcquire: Close makes every lease on the session
// lose its authority and waits for the session's goroutines. An Acquire whose
// queue transaction hangs (etcd unreachable) under a context without deadline
// must be aborted by that loss, not keep Close waiting forever.
func TestCloseDoesNotWaitForAQueuingAcquire(t *testing.T) {
	s, proxy := proxiedSession(t)
	proxy.Blackhole()
	defer proxy.Heal()

	acquired := make(chan error, 1)
	go func() {
		_, err := Acquire(context.Background(), s, "job")
		acquired <- err
	}()
	// Let the queue transaction reach the blackholed connection.
	time.Sleep(200 * time.Millisecond)
	if proxy.Stats().Blackholes == 0 {
		t.Fatal("the connection was never blackholed")
	}
	closed := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_ = s.Close(ctx)
		close(closed)
	}()
	// Close may spend its ctx on the revoke and Acquire its bounded cleanup
	// (TTL/3); neither may hang.
	coordtest.Recv(t, closed, testTTL, "Close with an Acquire queuing on a dead connection")
	select {
	case err := <-acquired:
		if err == nil {
			t.Fatal("Acquire succeeded on a closed session")
		}
	case <-time.After(testTTL):
		t.Fatal("Acquire still blocked after Close")
	}
}

// lostReply makes the next Txn look failed after etcd applied it (the reply is
// lost), and holds the Txn after it (Acquire's fence) until released.
type lostReply struct {
	failTxn       atomic.Bool
	holdNext      atomic.Bool
	deleteStarted chan struct{}
	releaseDelete chan struct{}
}

func (r *lostReply) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method == "/etcdserverpb.KV/Txn" && r.holdNext.CompareAndSwap(true, false) {
		close(r.deleteStarted)
		<-r.releaseDelete
	}
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err == nil && method == "/etcdserverpb.KV/Txn" && r.failTxn.CompareAndSwap(true, false) {
		r.holdNext.Store(true)
		return status.Error(codes.Internal, "injected: reply lost after the txn was applied")
	}
	return err
}

// TestUnknownQueueOutcomeNeverDeletesALiveLease: when Acquire's queue
// transaction fails with an unknown outcome, Acquire removes the key it may have
// created. That removal must not delete the key of a Lease that another Acquire
// of the same name on the same session obtained meanwhile: a lease returned by
// Acquire keeps its key.
func TestUnknownQueueOutcomeNeverDeletesALiveLease(t *testing.T) {
	e := coordtest.Etcd(t)
	r := &lostReply{deleteStarted: make(chan struct{}), releaseDelete: make(chan struct{})}
	cli := interceptedClient(t, e, r.unary)
	ctx := context.Background()
	s := newSession(t, cli, Config{Tenant: coordtest.Tenant(t), TTL: testTTL})

	r.failTxn.Store(true)
	firstErr := make(chan error, 1)
	go func() {
		_, err := Acquire(ctx, s, "job")
		firstErr <- err
	}()
	coordtest.Recv(t, r.deleteStarted, 10*time.Second, "the first Acquire's fence of its unknown queue outcome")
	if r.failTxn.Load() {
		t.Fatal("the lost reply was never injected")
	}

	second, err := Acquire(ctx, s, "job")
	close(r.releaseDelete)
	if err := coordtest.Recv(t, firstErr, 30*time.Second, "the first Acquire returning"); err == nil {
		t.Fatal("the first Acquire succeeded although its queue txn failed")
	}
	if err != nil {
		// Refusing while the first Acquire still cleans up is safe.
		if !errors.Is(err, ErrAlreadyQueued) {
			t.Fatalf("second Acquire: %v", err)
		}
		// Once the cleanup is done the name is free again.
		if second, err = Acquire(ctx, s, "job"); err != nil {
			t.Fatalf("Acquire after the cleanup: %v", err)
		}
	}
	defer second.Release(ctx)
	resp, err := cli.Get(ctx, second.Key())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != second.Token().Revision() {
		t.Fatalf("the first Acquire's cleanup deleted the key of the lease the second Acquire returned (%s)", second.Token())
	}
}
