package correctnesslease

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// The retry loops that read etcd again back off under ceilings that double from
// 50 ms up to 1 s. These are the first four ceilings.
var backoffCeilings = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}

// ceilingRecorder is a Config.backoffRand that records the ceiling of each delay
// drawn and draws no delay at all, so a test sees the schedule without waiting it.
type ceilingRecorder struct {
	mu       sync.Mutex
	ceilings []time.Duration
}

func (r *ceilingRecorder) rand(n int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ceilings = append(r.ceilings, time.Duration(n))
	return 0
}

func (r *ceilingRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprint(r.ceilings)
}

// failingTxns fails, without sending them, the client's Txns while fail is
// positive (counting it down).
type failingTxns struct{ fail atomic.Int64 }

func (f *failingTxns) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method == "/etcdserverpb.KV/Txn" && f.fail.Add(-1) >= 0 {
		return status.Error(codes.Internal, "injected: no answer to a Txn")
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// A waiter whose reads of the queue keep failing after its predecessor left
// retries them under a growing backoff (50 ms, 100 ms, 200 ms, 400 ms: not at a
// fixed rate, nor from a larger first ceiling), and acquires once etcd answers.
func TestWaiterBacksOffWhileTheQueueCannotBeRead(t *testing.T) {
	e := coordtest.Etcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := Config{Tenant: coordtest.Tenant(t), TTL: 10 * time.Second}
	other := e.Client(t)
	holder := newSession(t, other, cfg)
	held := mustAcquire(ctx, t, holder, "job")
	f := &failingTxns{}
	cli := interceptedClient(t, e, f.unary) // closed after the session's Close, which revokes through it
	rec := &ceilingRecorder{}
	wcfg := cfg
	wcfg.backoffRand = rec.rand
	s := newSession(t, cli, wcfg)
	acquired := acquireInBackground(ctx, s, "job", nil)
	waitKeys(t, other, held.Token().Lease()+"/", 2) // queued: its next Txn is its read of the queue
	f.fail.Store(int64(len(backoffCeilings)))
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := coordtest.Recv(t, acquired, 10*time.Second, "the waiter acquiring once etcd answers"); err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if got, want := rec.String(), fmt.Sprint(backoffCeilings); got != want {
		t.Fatalf("backoff ceilings of the failed reads of the queue %s, want %s", got, want)
	}
}
