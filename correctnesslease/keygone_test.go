package correctnesslease

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// When a lease's key is gone, keyGone asks etcd whether the session's lease is
// gone too. An answer that does not come (etcd unreachable: the question times
// out) is not "the session expired": only the key is reported lost, and the
// session stays up for its own renewal deadline to decide.
func TestKeyGoneWithEtcdUnreachableIsNotASessionExpiry(t *testing.T) {
	e := coordtest.Etcd(t)
	proxy := coordtest.NewProxy(t, strings.TrimPrefix(e.Endpoints[0], "http://"))
	cli := coordtest.NewEtcdClient(t, proxy.URL())
	s := newSession(t, cli, Config{Tenant: testTenant(t), TTL: testTTL})
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
