package correctnesslease

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// A retry loop against an etcd that keeps failing backs off: its delays are drawn
// under ceilings that double from 50 ms up to 1 s, so in the first second of
// failures it makes about seven attempts, and 15 or more only with a chance of
// about 3 in a million. A loop whose ceiling stayed at 50 ms would make at least 20.
const (
	failingFor          = time.Second
	tooManyAttemptsIn1s = 15
)

// failingTxns fails every Txn of the client without sending it while failing is
// set, counting them; first is closed at the first failure.
type failingTxns struct {
	failing   atomic.Bool
	failed    atomic.Int64
	first     chan struct{}
	firstOnce atomic.Bool
}

func (f *failingTxns) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method == "/etcdserverpb.KV/Txn" && f.failing.Load() {
		f.failed.Add(1)
		if f.firstOnce.CompareAndSwap(false, true) {
			close(f.first)
		}
		return status.Error(codes.Internal, "injected: no answer to a Txn")
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// A waiter whose reads of the queue keep failing after its predecessor left
// retries them with a growing backoff, not at a fixed rate, and acquires once etcd
// answers again.
func TestWaiterBacksOffWhileTheQueueCannotBeRead(t *testing.T) {
	e := coordtest.Etcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := Config{Tenant: testTenant(t), TTL: 10 * time.Second}
	other := e.Client(t)
	holder := newSession(t, other, cfg)
	held, err := Acquire(ctx, holder, "job")
	if err != nil {
		t.Fatal(err)
	}
	f := &failingTxns{first: make(chan struct{})}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   e.Endpoints,
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(f.unary)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	s := newSession(t, cli, cfg)
	acquired := make(chan error, 1)
	go func() {
		l, err := Acquire(ctx, s, "job")
		if l != nil {
			defer l.Release(context.Background())
		}
		acquired <- err
	}()
	waitKeys(t, other, held.Token().Lease()+"/", 2)
	f.failing.Store(true)
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitDone(t, f.first, 10*time.Second, "the waiter's first read of the queue after the release")
	time.Sleep(failingFor)
	f.failing.Store(false)
	n := f.failed.Load()
	if err := coordtest.Recv(t, acquired, 10*time.Second, "the waiter acquiring once etcd answers"); err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if n < 2 || n >= tooManyAttemptsIn1s {
		t.Fatalf("%d reads of the queue in %v of failures, want a few (more than one, under %d): a growing backoff", n, failingFor, tooManyAttemptsIn1s)
	}
}

// A lease whose key watch keeps ending while its reads of the key keep failing
// retries with a growing backoff, not at a fixed rate, and keeps its authority
// (and its watch) once etcd answers again.
func TestKeyWatchBacksOffWhileTheKeyCannotBeRead(t *testing.T) {
	e := coordtest.Etcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cli := coordtest.NewEtcdClient(t, e.Endpoints...)
	w := &endingWatcher{Watcher: cli.Watcher, rewatched: make(chan int64, 4)}
	kv := &failingGet{KV: cli.KV}
	cli.Watcher, cli.KV = w, kv // before the session starts: nothing else uses the client yet
	s := newSession(t, cli, Config{Tenant: testTenant(t), TTL: 10 * time.Second})
	prefix, err := coord.Key(s.cfg.Tenant, coord.KindElections, "job")
	if err != nil {
		t.Fatal(err)
	}
	w.key, kv.key = s.keyFor(prefix), s.keyFor(prefix)
	const lots = 1 << 20
	kv.fail.Store(lots)
	w.endAll.Store(true)
	l, err := Acquire(ctx, s, "job")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	for kv.failed.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the lease never read its key after its watch ended")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(failingFor)
	w.endAll.Store(false)
	kv.fail.Store(0)
	n := kv.failed.Load()
	if n < 2 || n >= tooManyAttemptsIn1s {
		t.Fatalf("%d reads of the key in %v of failures, want a few (more than one, under %d): a growing backoff", n, failingFor, tooManyAttemptsIn1s)
	}
	coordtest.Recv(t, w.rewatched, 10*time.Second, "the lease watching its key again once etcd answers")
	if err := l.Err(); err != nil {
		t.Fatalf("lease lost after its key could be read again: %v", err)
	}
	if _, err := cli.Delete(ctx, l.Key()); err != nil {
		t.Fatal(err)
	}
	waitDone(t, l.Context().Done(), 10*time.Second, "the lease whose key was deleted")
	if r := lossReason(l.Err()); r != coord.LossKeyDeleted {
		t.Fatalf("lease lost with %v, want %s", l.Err(), coord.LossKeyDeleted)
	}
}
