package membership_test

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

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// faults fails chosen etcd calls of a client: the next Put after etcd applied
// it (its reply lost), and every LeaseGrant while failGrant is set; while
// holdWatch is set, watch responses are held back (delivered once it clears).
type faults struct {
	loseNextPut atomic.Bool
	failGrant   atomic.Bool
	holdWatch   atomic.Bool
	// holdPut, when set, holds the next Put's reply (after etcd applied it):
	// applied is closed then, and the reply goes when release is closed.
	holdPut          atomic.Bool
	applied, release chan struct{}
}

type heldStream struct {
	grpc.ClientStream
	f *faults
}

func (h heldStream) RecvMsg(m any) error {
	err := h.ClientStream.RecvMsg(m)
	for h.f.holdWatch.Load() {
		time.Sleep(time.Millisecond)
	}
	return err
}

func (f *faults) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != "/etcdserverpb.Watch/Watch" {
		return cs, err
	}
	return heldStream{ClientStream: cs, f: f}, nil
}

func (f *faults) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method == "/etcdserverpb.Lease/LeaseGrant" && f.failGrant.Load() {
		return status.Error(codes.Unavailable, "injected: grant refused")
	}
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err == nil && method == "/etcdserverpb.KV/Put" && f.holdPut.CompareAndSwap(true, false) {
		close(f.applied)
		<-f.release
	}
	if err == nil && method == "/etcdserverpb.KV/Put" && f.loseNextPut.CompareAndSwap(true, false) {
		return status.Error(codes.Internal, "injected: reply lost after the put was applied")
	}
	return err
}

func faultyClient(t *testing.T, e *coordtest.EtcdServer, f *faults) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(f.unary), grpc.WithChainStreamInterceptor(f.stream)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// TestRegisterWithALostReplyLeavesNoKey: on a shared Session (whose lease stays
// alive) the first put of a registration is applied by etcd but its reply is
// lost. Register fails, and removes the key it may have written: an instance
// the caller was told is not registered must not stay listed under the
// session's lease.
func TestRegisterWithALostReplyLeavesNoKey(t *testing.T) {
	e := coordtest.Etcd(t)
	f := &faults{}
	s := sharedSession(t, faultyClient(t, e, f), membership.SessionConfig{})
	tenant := coordtest.Tenant(t)
	f.loseNextPut.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := s.Register(ctx, membership.Config{Tenant: tenant, Service: "api", Instance: "pod-1"})
	if err == nil {
		_ = r.Deregister(ctx)
		t.Fatal("Register succeeded although its put's reply was lost")
	}
	if f.loseNextPut.Load() {
		t.Fatal("the lost reply was never injected")
	}
	if ids, _ := instances(t, e.Client(t), tenant, "api"); len(ids) != 0 {
		t.Fatalf("a failed Register left the instances %v in etcd", ids)
	}
}

// TestRegisterWithoutALeaseFailsWithItsContext: a shared Session whose lease
// etcd revoked cannot get a new one (the grants fail; its backoff runs on a
// fake clock that never advances). A Register meanwhile waits for the lease
// until its context ends and returns that context's error — neither a panic
// over the lease it never had, nor ErrClosed for a session that is open.
func TestRegisterWithoutALeaseFailsWithItsContext(t *testing.T) {
	e := coordtest.Etcd(t)
	f := &faults{}
	s := sharedSession(t, faultyClient(t, e, f), membership.SessionConfig{Clock: coordtest.NewFakeClock(time.Now())})
	f.failGrant.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := e.Client(t).Revoke(ctx, s.Lease()); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, time.Second)
	defer rcancel()
	r, err := s.Register(rctx, membership.Config{Tenant: coordtest.Tenant(t), Service: "api", Instance: "pod-1"})
	if err == nil {
		_ = r.Deregister(ctx)
		t.Fatal("Register succeeded on a session without a lease")
	}
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, membership.ErrClosed) {
		t.Fatalf("Register without a lease: %v, want its context's deadline (and not ErrClosed)", err)
	}
}

// TestUpdateFindsTheKeyLostBeforeTheWatch: an Update of the registered key is
// no loss. Then the registration's key is deleted,
// then rewritten by someone else, each time before the key's watch can tell
// (its responses held back). An Update meanwhile is refused by its guard and
// reports ErrNotRegistered, and the registration records the loss Update found,
// with the right reason: the key gone, then the key someone else's.
func TestUpdateFindsTheKeyLostBeforeTheWatch(t *testing.T) {
	e := coordtest.Etcd(t)
	op := e.Client(t)
	f := &faults{}
	s := sharedSession(t, faultyClient(t, e, f), membership.SessionConfig{TTL: 30 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := s.Register(ctx, membership.Config{Tenant: coordtest.Tenant(t), Service: "api", Instance: "pod-1"})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	atEnd(t, r.Deregister)
	// An Update that its guard lets through is no loss.
	if err := r.Update(ctx, map[string]string{"v": "0"}); err != nil {
		t.Fatalf("Update of a registered key: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	if st := r.Status(); st.Losses != 0 || st.Registrations != 1 {
		t.Fatalf("a successful Update left %d losses and %d registrations (last loss %+v)", st.Losses, st.Registrations, st.LastLoss)
	}
	for i, step := range []struct {
		lose func() error
		want coord.LossReason
	}{
		{func() error { _, err := op.Delete(ctx, r.Key()); return err }, coord.LossKeyDeleted},
		{func() error { _, err := op.Put(ctx, r.Key(), `{"addr":"10.0.0.9:80"}`); return err }, membership.LossKeyOverwritten},
	} {
		f.holdWatch.Store(true)
		if err := step.lose(); err != nil {
			t.Fatal(err)
		}
		err := r.Update(ctx, map[string]string{"v": "1"})
		f.holdWatch.Store(false)
		if !errors.Is(err, membership.ErrNotRegistered) {
			t.Fatalf("step %d: Update of a lost key: %v, want ErrNotRegistered", i, err)
		}
		coordtest.Until(t, 5*time.Second, 5*time.Millisecond, "the loss Update found recorded", func() bool { return r.Status().Losses >= i+1 })
		if st := r.Status(); st.Losses != i+1 || st.LastLoss.Reason != step.want {
			t.Fatalf("step %d: after Update found the key lost: %d losses, last %+v, want reason %q", i, st.Losses, st.LastLoss, step.want)
		}
		coordtest.Until(t, 5*time.Second, 5*time.Millisecond, "re-registered", func() bool { return r.Status().Registrations == i+2 })
	}
}

// TestSessionClosedDuringTheFirstPutFailsRegister: a shared Session is closed
// while a Register's put is applied but its reply not yet back. The Close
// revoked the lease (and the key with it): Register must fail with ErrClosed,
// not return a registration of a key that is gone.
func TestSessionClosedDuringTheFirstPutFailsRegister(t *testing.T) {
	e := coordtest.Etcd(t)
	f := &faults{applied: make(chan struct{}), release: make(chan struct{})}
	s := sharedSession(t, faultyClient(t, e, f), membership.SessionConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f.holdPut.Store(true)
	regErr := make(chan error, 1)
	go func() {
		r, err := s.Register(ctx, membership.Config{Tenant: coordtest.Tenant(t), Service: "api", Instance: "pod-1"})
		if err == nil {
			_ = r.Deregister(ctx)
		}
		regErr <- err
	}()
	coordtest.Recv(t, f.applied, 10*time.Second, "the first put applied")
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	close(f.release)
	if err := coordtest.Recv(t, regErr, 10*time.Second, "Register returning"); !errors.Is(err, membership.ErrClosed) {
		t.Fatalf("Register whose session was closed during its put: %v, want ErrClosed", err)
	}
}

// TestDeregisterWaitsForAReregistrationInFlight: the key was lost and the
// registration's loop is re-putting it (the put applied, its reply held) when
// Deregister is called. Deregister must wait for that put and then delete the
// key it wrote: returning at once would leave the re-put key listed, under the
// shared Session's live lease, after the instance deregistered.
func TestDeregisterWaitsForAReregistrationInFlight(t *testing.T) {
	e := coordtest.Etcd(t)
	f := &faults{applied: make(chan struct{}), release: make(chan struct{})}
	s := sharedSession(t, faultyClient(t, e, f), membership.SessionConfig{})
	tenant := coordtest.Tenant(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := s.Register(ctx, membership.Config{Tenant: tenant, Service: "api", Instance: "pod-1"})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	f.holdPut.Store(true)
	if _, err := e.Client(t).Delete(ctx, r.Key()); err != nil {
		t.Fatal(err)
	}
	coordtest.Recv(t, f.applied, 10*time.Second, "the re-registration's put applied")
	time.AfterFunc(300*time.Millisecond, func() { close(f.release) })
	if err := r.Deregister(ctx); err != nil {
		t.Fatalf("Deregister: %v", err)
	}
	time.Sleep(500 * time.Millisecond) // past the held reply
	if ids, _ := instances(t, e.Client(t), tenant, "api"); len(ids) != 0 {
		t.Fatalf("after Deregister the instances %v are in etcd", ids)
	}
}
