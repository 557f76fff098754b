package membership

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord/quotakv"
	"github.com/coordkit/coordkit/internal/etcderr"
	"github.com/coordkit/coordkit/internal/watchplane"
)

// Session owns one etcd lease and its keepalive loop, shared by every
// Registration on it: a process registering many instances sends one keepalive
// per TTL/3, not one per instance.
//
// Unlike correctnesslease.Session, a membership Session never ends on loss.
// When etcd says the lease is gone (a keepalive or a put answers "lease not
// found") it grants a new lease, with full-jitter backoff and no retry cap, and
// every registration on it re-puts its key under the new one. Call Close when
// done. Safe for concurrent use.
type Session struct {
	cli     *clientv3.Client
	kv      *quotakv.KV
	cfg     SessionConfig
	in      *sessionInstruments
	plane   *watchplane.Plane // the registrations follow their keys through it
	private bool              // made by Register for one registration: Deregister closes it

	stopCtx context.Context // cancelled by Close
	stop    context.CancelFunc
	wg      sync.WaitGroup // the keepalive loop
	wake    chan struct{}  // cap 1: a registration reported the lease gone
	gauge   metric.Registration

	mu        sync.Mutex
	cur       *grant           // the live lease; nil while a new one is granted
	ready     chan struct{}    // closed when cur is set again
	suspect   clientv3.LeaseID // a lease a registration's put found gone
	confirmed bool             // a keepalive or grant sent less than a TTL ago succeeded
	closed    bool
	regs      map[*Registration]struct{}
}

// grant is one lease of the session.
type grant struct {
	id   clientv3.LeaseID
	lost chan struct{} // closed when etcd has said the lease is gone
}

// NewSession grants a lease of cfg.TTL and starts its keepalive loop. It blocks
// for the grant, bounded by ctx and cfg.RequestTimeout. It returns a
// *ConfigError (ErrInvalidConfig) for invalid configuration and the etcd error
// otherwise. ctx is not retained: the session lives until Close.
func NewSession(ctx context.Context, cli *clientv3.Client, cfg SessionConfig) (*Session, error) {
	if cli == nil {
		return nil, &ConfigError{Field: "client", Reason: "nil *clientv3.Client"}
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Session{
		cli:  cli,
		cfg:  cfg,
		in:   newSessionInstruments(cfg),
		wake: make(chan struct{}, 1),
		regs: map[*Registration]struct{}{},
	}
	s.kv = quotakv.New(cli, cfg.Quotas, quotakv.Config{MeterProvider: cfg.MeterProvider})
	sent := cfg.Clock.Now()
	id, err := s.grantLease(ctx)
	if err != nil {
		return nil, fmt.Errorf("membership: grant lease: %w", etcderr.Classify(err))
	}
	if cfg.PrivateWatches {
		s.plane = watchplane.New(cli, watchplane.Config{Clock: cfg.Clock, RequestTimeout: cfg.RequestTimeout,
			Quotas: cfg.Quotas, Logger: cfg.Logger, MeterProvider: cfg.MeterProvider})
	} else {
		s.plane = watchplane.For(cli, cfg.Clock)
	}
	s.cur, s.confirmed = &grant{id: id, lost: make(chan struct{})}, true
	s.stopCtx, s.stop = context.WithCancel(context.Background())
	s.gauge, err = s.in.meter.RegisterCallback(s.observe, s.in.registered)
	if err != nil {
		cfg.Logger.Warn("membership: registered gauge", "err", err)
	}
	s.wg.Add(1)
	go s.run(sent)
	return s, nil
}

// TTL returns the session's lease TTL. It does not block.
func (s *Session) TTL() time.Duration { return s.cfg.TTL }

// Lease returns the session's current lease, or 0 while a new one is being
// granted after a loss. It does not block. Keys attached to it by the caller
// are not re-put after a loss; only registrations are.
func (s *Session) Lease() clientv3.LeaseID {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return 0
	}
	return s.cur.id
}

// Close deregisters every registration on the session at once (their loops
// stop, then one revoke deletes every key still attached to the lease, and no
// other) and stops the keepalive loop. It blocks for the revoke, bounded by
// ctx, and returns its error, if any (the keys then expire within the TTL).
// Calling Close again returns nil.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	regs := s.registrationsLocked()
	s.mu.Unlock()
	for _, r := range regs {
		r.stopLoop()
	}
	s.stop()
	s.wg.Wait()
	if s.gauge != nil {
		_ = s.gauge.Unregister()
	}
	if s.cfg.PrivateWatches {
		s.plane.Close()
	}
	s.mu.Lock()
	g := s.cur
	s.mu.Unlock()
	if g == nil {
		return nil // the lease is gone, and its keys with it
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	if _, err := s.cli.Revoke(rctx, g.id); err != nil && !isLeaseGone(err) {
		return fmt.Errorf("membership: revoke lease %x: %w", int64(g.id), etcderr.Classify(err))
	}
	return nil
}

// run is the keepalive loop. It sends one keepalive every TTL/3 (counted from
// the send time of the last success), retries failures with full jitter below
// TTL/6, marks the session unconfirmed when no keepalive sent in the last TTL
// has succeeded (the lease may have expired: Registered turns false), and grants
// a new lease when etcd says the current one is gone. It waits on one fresh
// timer per step, for the earlier of the next keepalive and the TTL deadline.
func (s *Session) run(lastOK time.Time) {
	defer s.wg.Done()
	clk := s.cfg.Clock
	retry := s.cfg.keepaliveBackoff()
	next := lastOK.Add(s.cfg.TTL / 3) // when the next keepalive is due
	failures := 0
	for {
		expireAt := lastOK.Add(s.cfg.TTL)
		wait := next.Sub(clk.Now())
		if s.isConfirmed() {
			wait = min(wait, expireAt.Sub(clk.Now()))
		}
		t := clk.NewTimer(wait)
		var cause error
		select {
		case <-s.stopCtx.Done():
			t.Stop()
			return
		case <-s.wake:
			t.Stop()
			cause = s.takeSuspect()
		case <-t.C():
		}
		if cause == nil {
			now := clk.Now()
			if s.isConfirmed() && !now.Before(expireAt) {
				s.setConfirmed(false)
				s.cfg.Logger.Warn("membership: no keepalive succeeded for a TTL; registrations unconfirmed",
					"lease_id", leaseHex(s.Lease()), "ttl", s.cfg.TTL)
			}
			if now.Before(next) {
				continue
			}
			sent := now
			err := s.keepAlive()
			switch {
			case err == nil:
				failures, lastOK = 0, sent
				next = sent.Add(s.cfg.TTL / 3)
				s.setConfirmed(true)
				continue
			case !isLeaseGone(err):
				s.cfg.Logger.Warn("membership: keepalive failed", "lease_id", leaseHex(s.Lease()), "attempt", failures, "err", err)
				reconnect(s.cli)
				next = clk.Now().Add(retry.Delay(failures))
				failures++
				continue
			}
			cause = err
		}
		sent, ok := s.regrant(cause)
		if !ok {
			return
		}
		failures, lastOK = 0, sent
		next = lastOK.Add(s.cfg.TTL / 3)
	}
}

// keepAlive sends one keepalive for the current lease, bounded by
// KeepaliveTimeout.
func (s *Session) keepAlive() error {
	id := s.Lease()
	ctx, cancel := context.WithTimeout(s.stopCtx, s.cfg.KeepaliveTimeout)
	defer cancel()
	_, err := s.cli.KeepAliveOnce(ctx, id)
	s.in.keepalive(err == nil)
	return err
}

// regrant replaces a lease etcd no longer has: it wakes every registration
// (their keys went with the lease), then grants a new lease with full-jitter
// backoff until it succeeds or the session closes. It returns the send time of
// the successful grant.
func (s *Session) regrant(cause error) (time.Time, bool) {
	s.mu.Lock()
	old := s.cur
	s.cur, s.ready, s.confirmed = nil, make(chan struct{}), false
	regs := s.registrationsLocked()
	s.mu.Unlock()
	close(old.lost)
	for _, r := range regs {
		r.notify()
	}
	s.cfg.Logger.Warn("membership: lease gone; granting a new one", "lease_id", leaseHex(old.id), "err", cause)
	clk := s.cfg.Clock
	for attempt := 0; ; attempt++ {
		sent := clk.Now()
		id, err := s.grantLease(s.stopCtx)
		if err == nil {
			s.mu.Lock()
			s.cur, s.confirmed = &grant{id: id, lost: make(chan struct{})}, true
			close(s.ready)
			s.mu.Unlock()
			s.cfg.Logger.Info("membership: new lease granted", "lease_id", leaseHex(id), "attempt", attempt)
			return sent, true
		}
		if s.stopCtx.Err() != nil {
			return time.Time{}, false
		}
		s.cfg.Logger.Warn("membership: grant failed", "attempt", attempt, "err", err)
		reconnect(s.cli)
		if s.cfg.Backoff.Wait(s.stopCtx, clk, attempt) != nil {
			return time.Time{}, false
		}
	}
}

func (s *Session) grantLease(ctx context.Context) (clientv3.LeaseID, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	resp, err := s.cli.Grant(ctx, int64(math.Ceil(s.cfg.TTL.Seconds())))
	if err != nil {
		return 0, err
	}
	return resp.ID, nil
}

// lease returns the live lease, or nil and a channel closed when one is
// granted; ok is false after Close.
func (s *Session) lease() (g *grant, ready <-chan struct{}, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.ready, !s.closed
}

// reportLost tells the keepalive loop that a put found lease id gone.
func (s *Session) reportLost(id clientv3.LeaseID) {
	s.mu.Lock()
	s.suspect = id
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// takeSuspect returns a cause when the lease a registration reported gone is
// still the current one (else a new lease was granted already).
func (s *Session) takeSuspect() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.suspect
	s.suspect = 0
	if id == 0 || s.cur == nil || s.cur.id != id {
		return nil
	}
	return fmt.Errorf("lease %s: %w", leaseHex(id), rpctypes.ErrLeaseNotFound)
}

func (s *Session) setConfirmed(ok bool) {
	s.mu.Lock()
	changed := s.confirmed != ok
	s.confirmed = ok
	regs := s.registrationsLocked()
	s.mu.Unlock()
	if changed {
		for _, r := range regs {
			r.notify()
		}
	}
}

func (s *Session) isConfirmed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.confirmed
}

// add records r, failing after Close or when the session already registers
// r's key.
func (s *Session) add(r *Registration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("membership: register on a closed session: %w", ErrClosed)
	}
	for o := range s.regs {
		if o.inst.key == r.inst.key {
			return &ConfigError{Field: "Instance", Reason: "already registered on this session: " + r.inst.key}
		}
	}
	s.regs[r] = struct{}{}
	return nil
}

func (s *Session) remove(r *Registration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.regs, r)
}

func (s *Session) registrationsLocked() []*Registration {
	out := make([]*Registration, 0, len(s.regs))
	for r := range s.regs {
		out = append(out, r)
	}
	return out
}

// observe reports coordkit.membership.registered for every registration.
func (s *Session) observe(_ context.Context, o metric.Observer) error {
	s.mu.Lock()
	regs := s.registrationsLocked()
	s.mu.Unlock()
	for _, r := range regs {
		v := int64(0)
		if r.Registered() {
			v = 1
		}
		o.ObserveInt64(s.in.registered, v, metric.WithAttributeSet(r.attrs))
	}
	return nil
}

// isLeaseGone reports whether etcd answered that the lease does not exist
// (expired or revoked). Other errors (timeouts, an unreachable etcd, refused
// permissions) say nothing about the lease: they are retried.
func isLeaseGone(err error) bool { return errors.Is(err, rpctypes.ErrLeaseNotFound) }

// reconnect asks the client's gRPC connection to retry connecting now instead of
// at the end of gRPC's own exponential connect backoff (1 s growing to 120 s:
// measured, a client whose etcd was down for 30 s reached it again 10 s after
// it returned). Callers invoke it before each retry, so the jittered schedule of
// coord.Backoff, not gRPC's, decides when a fleet comes back. A no-op while
// connected.
func reconnect(cli *clientv3.Client) {
	if cc := cli.ActiveConnection(); cc != nil {
		cc.ResetConnectBackoff()
	}
}

func leaseHex(id clientv3.LeaseID) string { return strconv.FormatInt(int64(id), 16) }
