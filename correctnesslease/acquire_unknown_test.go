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
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   e.Endpoints,
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(r.unary)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	s := newSession(t, cli, Config{Tenant: coordtest.Tenant(t), TTL: testTTL})

	r.failTxn.Store(true)
	firstErr := make(chan error, 1)
	go func() {
		_, err := Acquire(ctx, s, "job")
		firstErr <- err
	}()
	waitDone(t, r.deleteStarted, 10*time.Second, "the first Acquire's fence of its unknown queue outcome")
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
