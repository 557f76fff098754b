package correctnesslease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// simLease models etcd's side of one lease: it expires TTL after the last
// keepalive that ARRIVED. The network between the session and it has a request
// delay, a response delay, and can be cut.
type simLease struct {
	mu        sync.Mutex
	ttl       time.Duration
	expiry    time.Time
	reqDelay  time.Duration
	respDelay time.Duration
	cut       bool
	calls     int
}

func (sl *simLease) keepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	sl.mu.Lock()
	sl.calls++
	cut, req, resp := sl.cut, sl.reqDelay, sl.respDelay
	sl.mu.Unlock()
	if cut {
		<-ctx.Done() // a blackhole: no answer, ever
		return nil, ctx.Err()
	}
	select {
	case <-time.After(req):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	sl.mu.Lock()
	if time.Now().After(sl.expiry) {
		sl.mu.Unlock()
		return nil, rpctypes.ErrLeaseNotFound
	}
	sl.expiry = time.Now().Add(sl.ttl) // the server renews when the request arrives
	sl.mu.Unlock()
	select {
	case <-time.After(resp):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &clientv3.LeaseKeepAliveResponse{ID: id, TTL: int64(sl.ttl / time.Second)}, nil
}

// TestStepDownPrecedesExpiry is the deterministic part of the delayed-keepalive
// reliability test: with fake time (testing/synctest), for keepalive round trips
// of 0, TTL/6 and just under TTL/3 (all of it on the response, or split evenly
// between request and response), and for a blackhole
// starting at every 1/20 of a renewal period, the session steps down strictly
// before the server would expire the lease, and never steps down while
// keepalives get through.
func TestStepDownPrecedesExpiry(t *testing.T) {
	const ttl = 3 * time.Second
	delays := []time.Duration{0, ttl / 6, ttl/3 - 10*time.Millisecond}
	runs, minMargin := 0, time.Duration(1<<62)
	for _, rtt := range delays {
		for _, split := range []int{0, 2} {
			req, resp := time.Duration(0), rtt
			if split == 2 {
				req, resp = rtt/2, rtt-rtt/2
			}
			for k := range 20 {
				offset := time.Duration(k) * ttl / 3 / 20
				name := fmt.Sprintf("resp=%v/req=%v/cut+%v", resp, req, offset)
				synctest.Test(t, func(t *testing.T) {
					cfg := Config{Tenant: "sim", TTL: ttl, KeepaliveTimeout: ttl/3 - 5*time.Millisecond,
						Logger: coordtest.Logger(t)}.withDefaults()
					if err := cfg.validate(); err != nil {
						t.Fatal(err)
					}
					sl := &simLease{ttl: ttl, reqDelay: req, respDelay: resp}
					cfg.keepAliveOnce = sl.keepAliveOnce
					s := newSessionState(nil, cfg)
					s.id = 1
					sent := time.Now()
					sl.expiry = sent.Add(ttl) // granted on arrival, at best immediately
					s.start(sent)

					// Healthy for 5 TTL: no step-down, whatever the delays.
					time.Sleep(5*ttl + offset)
					synctest.Wait()
					if s.Err() != nil {
						t.Fatalf("%s: stepped down while keepalives got through: %v", name, s.Err())
					}
					sl.mu.Lock()
					sl.cut = true
					calls := sl.calls
					sl.mu.Unlock()
					if calls < 15 {
						t.Fatalf("%s: %d keepalives in 5 TTL", name, calls)
					}
					coordtest.Recv(t, s.Done(), ttl, name+": step-down after the cut (fake time)")
					stepDown := time.Now()
					sl.mu.Lock()
					expiry := sl.expiry // includes keepalives in flight at the cut
					sl.mu.Unlock()
					if !stepDown.Before(expiry) {
						t.Fatalf("%s: step-down at %v, server expiry at %v", name, stepDown.Sub(sent), expiry.Sub(sent))
					}
					if m := expiry.Sub(stepDown); m < minMargin {
						minMargin = m
					}
					if lossReason(s.Err()) != coord.LossRenewalDeadline {
						t.Fatalf("%s: %v", name, s.Err())
					}
					_ = s.Close(context.Background())
					runs++
				})
			}
		}
	}
	t.Logf("%d fake-time runs: step-down preceded server expiry in every one; smallest margin %v (TTL %v)", runs, minMargin, ttl)
	if runs != len(delays)*2*20 {
		t.Fatalf("ran %d of %d cases", runs, len(delays)*2*20)
	}
}

// TestFatalKeepaliveErrors: "lease not found", permission denied and auth
// errors are loss of authority at once, not something to retry.
func TestFatalKeepaliveErrors(t *testing.T) {
	for _, fatal := range []error{rpctypes.ErrLeaseNotFound, rpctypes.ErrPermissionDenied, rpctypes.ErrInvalidAuthToken, rpctypes.ErrGRPCLeaseNotFound} {
		synctest.Test(t, func(t *testing.T) {
			cfg := Config{Tenant: "sim", TTL: 3 * time.Second, Logger: coordtest.Logger(t)}.withDefaults()
			if err := cfg.validate(); err != nil {
				t.Fatal(err)
			}
			calls := 0
			cfg.keepAliveOnce = func(context.Context, clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
				calls++
				return nil, fatal
			}
			s := newSessionState(nil, cfg)
			start := time.Now()
			s.start(start)
			coordtest.Recv(t, s.Done(), cfg.TTL, fmt.Sprintf("%v: step-down (fake time)", fatal))
			if d := time.Since(start); d != cfg.TTL/3 || calls != 1 {
				t.Fatalf("%v: lost after %v and %d calls, want at the first keepalive", fatal, d, calls)
			}
			if lossReason(s.Err()) != coord.LossSessionExpired || !errors.Is(s.Err(), fatal) {
				t.Fatalf("%v: Err %v", fatal, s.Err())
			}
			_ = s.Close(context.Background())
		})
	}
	if isLeaseGone(errors.New("connection refused")) || isLeaseGone(context.DeadlineExceeded) {
		t.Fatal("transient errors classified as loss")
	}
}

// TestKeepaliveSharedBy1000Leases holds 1,000 leases on one session and one
// lease on another, side by side for 3 TTL, and counts the LeaseKeepAlive RPCs
// each client sent (a gRPC interceptor, independent of our own counter): equal.
func TestKeepaliveSharedBy1000Leases(t *testing.T) {
	e := coordtest.Etcd(t)
	many, manyRPC := coordtest.CountingEtcdClient(t, e.Endpoints...)
	one, oneRPC := coordtest.CountingEtcdClient(t, e.Endpoints...)
	ctx := context.Background()
	// A generous timeout: a keepalive timing out on the busy box would add a
	// retry to one side and blur the comparison.
	cfg := Config{Tenant: coordtest.Tenant(t), TTL: 3 * time.Second, KeepaliveTimeout: time.Second - 10*time.Millisecond}
	sMany := newSession(t, many, cfg)
	const n = 1000
	leases := make([]*Lease, 0, n)
	for i := range n {
		l, err := Acquire(ctx, sMany, fmt.Sprintf("shard-%04d", i))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	sOne := newSession(t, one, cfg)
	if _, err := Acquire(ctx, sOne, "single"); err != nil {
		t.Fatal(err)
	}
	// Both sessions now renew side by side; count from here.
	m0, o0 := manyRPC.Count("/LeaseKeepAlive"), oneRPC.Count("/LeaseKeepAlive")
	own0 := sMany.rpcs.Load()
	time.Sleep(3 * cfg.TTL)
	m, o := manyRPC.Count("/LeaseKeepAlive")-m0, oneRPC.Count("/LeaseKeepAlive")-o0
	t.Logf("keepalive RPCs over 3 TTL: 1,000 leases: %d, 1 lease: %d (own counter %d)", m, o, sMany.rpcs.Load()-own0)
	if o < 8 {
		t.Fatalf("single-lease session sent only %d keepalives in 3 TTL", o)
	}
	if d := m - o; d < -1 || d > 1 { // the two loops are not in phase: ±1
		t.Fatalf("1,000 leases sent %d keepalives, one lease %d", m, o)
	}
	for _, l := range leases {
		if l.Err() != nil {
			t.Fatalf("lease lost: %v", l.Err())
		}
	}
	// Session loss is loss of every lease at once.
	if err := sMany.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		if lossReason(context.Cause(l.Context())) != coord.LossReleased {
			t.Fatalf("lease after Close: %v", context.Cause(l.Context()))
		}
	}
	waitKeys(t, one, "/tenants/"+cfg.Tenant+"/elections/shard-", 0)
}

// TestSlowStartCountsFromGrant: the deadline counts from when the grant was
// sent, however long attaching the session key took.
func TestSlowStartCountsFromGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{Tenant: "sim", TTL: 3 * time.Second, Logger: coordtest.Logger(t)}.withDefaults()
		if err := cfg.validate(); err != nil {
			t.Fatal(err)
		}
		cfg.keepAliveOnce = func(ctx context.Context, _ clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		s := newSessionState(nil, cfg)
		granted := time.Now()
		time.Sleep(1500 * time.Millisecond) // a slow Put of the session key
		s.start(granted)
		coordtest.Recv(t, s.Done(), cfg.TTL, "step-down after a slow start (fake time)")
		if d := time.Since(granted); d != 2*time.Second {
			t.Fatalf("stepped down %v after the grant was sent, want 2/3 TTL = 2s", d)
		}
		_ = s.Close(context.Background())
	})
}

// TestLeaseValid: Valid is true while held and false from the renewal deadline
// on (on the session clock, whether or not the renewal loop has run since),
// and after Release.
func TestLeaseValid(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx := context.Background()
	clk := coordtest.NewFakeClock(time.Now())
	s := newSession(t, cli, Config{Tenant: coordtest.Tenant(t), TTL: testTTL, Clock: clk})
	if s.Tenant() != coordtest.Tenant(t) {
		t.Fatalf("Tenant() = %q", s.Tenant())
	}
	a := mustAcquire(ctx, t, s, "a")
	b, err := Acquire(ctx, s, "b")
	if err != nil {
		t.Fatal(err)
	}
	if !a.Valid() || !b.Valid() {
		t.Fatal("Valid() = false right after Acquire")
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if b.Valid() {
		t.Fatal("Valid() = true after Release")
	}
	clk.Advance(testTTL * 2 / 3) // no keepalive sent since the grant: deadline reached
	if a.Valid() {
		t.Fatal("Valid() = true at the renewal deadline")
	}
	coordtest.Recv(t, s.Done(), 10*time.Second, "session step-down after Valid saw the deadline")
	if a.Valid() {
		t.Fatal("Valid() = true after step-down")
	}
}
