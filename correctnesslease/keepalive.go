package correctnesslease

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordkit/coordkit/coord"
)

// keepAliveFunc is the signature of clientv3.Client.KeepAliveOnce.
type keepAliveFunc func(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error)

type keepAliveResult struct {
	sent time.Time
	err  error
}

// renew is the session's renewal loop. It sends one keepalive every TTL/3 (after a
// failure, every TTL/12), each bounded by KeepaliveTimeout on the session clock,
// and steps down when none has succeeded for 2/3 TTL, counted from the send time
// of the last success (the grant, at first). etcd cannot expire the lease earlier
// than a full TTL after it received that keepalive, which is after it was sent.
func (s *Session) renew(granted time.Time) {
	defer s.wg.Done()
	clk := s.cfg.Clock
	lastOK := granted

	// Both timers count from the grant's send time, not from now: attaching the
	// session key (or a slow start) must not push the step-down past expiry.
	tick := clk.NewTimer(granted.Add(s.cfg.renewInterval()).Sub(clk.Now()))
	defer tick.Stop()
	deadline := clk.NewTimer(granted.Add(s.cfg.stepDownAfter()).Sub(clk.Now()))
	defer deadline.Stop()
	timeout := clk.NewTimer(time.Hour)
	timeout.Stop()
	defer timeout.Stop()

	results := make(chan keepAliveResult, 1)
	var cancelRPC context.CancelFunc // non-nil while a keepalive is in flight
	defer func() {
		if cancelRPC != nil {
			cancelRPC()
			<-results
		}
	}()

	for {
		select {
		case <-s.stopCtx.Done():
			return
		case <-s.done:
			return

		case <-tick.C():
			if cancelRPC != nil {
				continue // cannot happen: the tick is re-armed only after a result
			}
			timeout.Reset(s.cfg.KeepaliveTimeout)
			cancelRPC = s.sendKeepalive(results)

		case <-timeout.C():
			if cancelRPC != nil {
				cancelRPC() // the result arrives as a context error
			}

		case r := <-results:
			cancelRPC()
			cancelRPC = nil
			timeout.Stop()
			rtt := clk.Now().Sub(r.sent)
			s.in.renewed(rtt, r.err == nil)
			if r.err == nil {
				if r.sent.After(lastOK) {
					lastOK = r.sent
				}
				s.renewed(lastOK)
				deadline.Reset(lastOK.Add(s.cfg.stepDownAfter()).Sub(clk.Now()))
				tick.Reset(r.sent.Add(s.cfg.renewInterval()).Sub(clk.Now()))
				continue
			}
			if isLeaseGone(r.err) {
				s.lose(coord.LossSessionExpired, r.err)
				return
			}
			s.cfg.Logger.Warn("correctnesslease: keepalive failed", "tenant", s.cfg.Tenant,
				"lease_id", strconv.FormatInt(int64(s.id), 16), "rtt", rtt, "err", r.err,
				"step_down_in", lastOK.Add(s.cfg.stepDownAfter()).Sub(clk.Now()))
			tick.Reset(s.cfg.retryInterval())

		case <-deadline.C():
			s.stepDown()
			return
		}
	}
}

// sendKeepalive starts one keepalive RPC, stamped with its send time; its result
// arrives on results. The returned function cancels it.
func (s *Session) sendKeepalive(results chan<- keepAliveResult) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	sent := s.cfg.Clock.Now()
	s.rpcs.Add(1)
	go func() {
		_, err := s.cfg.keepAliveOnce(ctx, s.id)
		results <- keepAliveResult{sent: sent, err: err}
	}()
	return cancel
}

// isLeaseGone reports whether a keepalive error means the lease no longer exists
// or can no longer be renewed by us: not found, permission denied or an auth
// failure. Those are loss of authority, not a reason to reconnect.
func isLeaseGone(err error) bool {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(err, rpctypes.ErrGRPCLeaseNotFound) {
		return true
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		switch ee.Code() {
		case codes.NotFound, codes.PermissionDenied, codes.Unauthenticated:
			return true
		}
	}
	switch status.Code(err) {
	case codes.NotFound, codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return false
}
