package correctnesslease

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// When a lease's key is gone, keyGone asks etcd whether the session's lease is
// gone too. An answer that does not come (etcd unreachable: the question times
// out) is not "the session expired": only the key is reported lost, and the
// session stays up for its own renewal deadline to decide.
func TestKeyGoneWithEtcdUnreachableIsNotASessionExpiry(t *testing.T) {
	s, proxy := proxiedSession(t)
	proxy.Blackhole()
	defer proxy.Heal()
	got := s.keyGone(context.Background())
	if got == coord.LossSessionExpired {
		t.Fatalf("keyGone with etcd unreachable = %v (session err %v), want %v: a timeout is not an expiry", got, s.Err(), coord.LossKeyDeleted)
	}
	if proxy.Stats().Blackholes == 0 {
		t.Fatal("the connection was never blackholed")
	}
}

// deadlineOnly reports a deadline without having been cancelled yet: what etcd
// sees when it answers "request timed out" an instant before the client's timer.
type deadlineOnly struct {
	context.Context
	d time.Time
}

func (c deadlineOnly) Deadline() (time.Time, bool) { return c.d, true }

// ended names why a context is over: its cause once done, DeadlineExceeded once its
// deadline has passed even before its timer fired, and nothing otherwise.
func TestEndedNamesWhyAContextIsOver(t *testing.T) {
	if err := ended(context.Background()); err != nil {
		t.Fatalf("ended(a live context without deadline) = %v, want nil", err)
	}
	if err := ended(deadlineOnly{context.Background(), time.Now().Add(time.Hour)}); err != nil {
		t.Fatalf("ended(a deadline an hour away) = %v, want nil", err)
	}
	if err := ended(deadlineOnly{context.Background(), time.Now().Add(-time.Millisecond)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ended(a deadline just passed, timer not fired) = %v, want DeadlineExceeded", err)
	}
	cause := errors.New("shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	if err := ended(ctx); !errors.Is(err, cause) {
		t.Fatalf("ended(a cancelled context) = %v, want its cause", err)
	}
}

// leaseAnswer is a clientv3.Lease whose TimeToLive answers as told instead of
// asking etcd (every other call goes to etcd): the answers keyGone must read that
// no test can time on a real server, a lease in its last second or an error that
// names the lease gone.
type leaseAnswer struct {
	clientv3.Lease
	ttl   int64
	err   error
	asked atomic.Int64
}

func (a *leaseAnswer) TimeToLive(_ context.Context, id clientv3.LeaseID, _ ...clientv3.LeaseOption) (*clientv3.LeaseTimeToLiveResponse, error) {
	a.asked.Add(1)
	if a.err != nil {
		return nil, a.err
	}
	return &clientv3.LeaseTimeToLiveResponse{ID: id, TTL: a.ttl}, nil
}

// keyGone's verdict from etcd's answer about the session's lease. etcd reports
// the remaining TTL in whole seconds rounded toward zero: 0 for a lease in its
// last second or expired and not yet revoked by the leader, -1 for a lease it no
// longer has; an error saying the lease is not found means the same. Each of
// those is the session expiring (its keys go with its lease), and the session
// loses its authority; only a lease with time left means someone else deleted the
// key. The session clock is a fake one, so the renewal deadline never decides.
func TestKeyGoneReadsEtcdsAnswerAboutTheLease(t *testing.T) {
	e := coordtest.Etcd(t)
	for _, c := range []struct {
		name string
		ttl  int64
		err  error
		want coord.LossReason
	}{
		{"TTL 0, the last second", 0, nil, coord.LossSessionExpired},
		{"TTL -1, not found", -1, nil, coord.LossSessionExpired},
		{"error, lease not found", 0, rpctypes.ErrLeaseNotFound, coord.LossSessionExpired},
		{"TTL 1, alive", 1, nil, coord.LossKeyDeleted},
	} {
		t.Run(c.name, func(t *testing.T) {
			cli := coordtest.NewEtcdClient(t, e.Endpoints...)
			a := &leaseAnswer{Lease: cli.Lease, ttl: c.ttl, err: c.err}
			cli.Lease = a // before the session starts: nothing else uses the client yet
			clk := coordtest.NewFakeClock(time.Now())
			s := newSession(t, cli, Config{Tenant: coordtest.Tenant(t), TTL: 10 * time.Second, Clock: clk})
			if got := s.keyGone(context.Background()); got != c.want {
				t.Fatalf("keyGone with TimeToLive answering TTL %d, error %v = %v, want %v", c.ttl, c.err, got, c.want)
			}
			if n := a.asked.Load(); n != 1 {
				t.Fatalf("TimeToLive asked %d times, want once", n)
			}
			switch got := lossReason(s.Err()); {
			case c.want == coord.LossSessionExpired && got != coord.LossSessionExpired:
				t.Fatalf("session Err %v after a verdict of expiry, want reason %v", s.Err(), coord.LossSessionExpired)
			case c.want == coord.LossKeyDeleted && s.Err() != nil:
				t.Fatalf("session lost (%v) for one key deleted by someone else", s.Err())
			}
		})
	}
}
