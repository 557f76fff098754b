package correctnesslease

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/etcderr"
	"github.com/coordkit/coordkit/internal/watchplane"
)

// Session owns one etcd lease, kept alive by its own renewal loop, and every
// Lease acquired on it. All leases on a session share its single keepalive and
// lose their authority together when the session does. Call Close when done: it
// stops the session's goroutines and frees its keys at once. Safe for concurrent
// use.
type Session struct {
	cli    *clientv3.Client
	cfg    Config
	plane  *watchplane.Plane // the leases follow their keys through it
	id     clientv3.LeaseID
	member string // the key the session owns, under /tenants/{t}/members/
	// memberValue is the member key's value (host and pid), rewritten by fences.
	memberValue string
	// guard is the member key's mod revision, compared by every queue
	// transaction; a fence rewrites the key to invalidate queue transactions in
	// flight (see Lease.fenceUnknown).
	guard atomic.Int64
	in    *instruments
	// queues and deletes commit the queue transactions of concurrent Acquires
	// and the guarded deletes of concurrent Releases together.
	queues  *groupCommit[*Lease, queued]
	deletes *groupCommit[*Lease, error]

	done          chan struct{}      // closed when authority is lost
	stopCtx       context.Context    // cancelled by Close: ends the renewal loop and watchers
	stop          context.CancelFunc // cancels stopCtx
	stopOnce      sync.Once
	wg            sync.WaitGroup // the renewal loop, lease watchers, the revoke after a step-down
	wakeups       atomic.Int64   // waiters woken by their predecessor's deletion (tests: no herd)
	rpcs          atomic.Int64   // keepalive RPCs sent
	unknownQueues atomic.Int64   // queue transactions that ended without an answer (tests)
	fencedKeys    atomic.Int64   // keys of such transactions deleted by their fence (tests)

	mu          sync.Mutex
	lastRenewed time.Time                 // send time of the last successful keepalive (or the grant)
	err         *coord.AuthorityLostError // set once, when done is closed
	leases      map[*Lease]struct{}       // held and waiting leases
	keys        map[string]*Lease         // the same, by key
}

// NewSession grants an etcd lease of cfg.TTL, attaches a key the session owns
// under /tenants/{cfg.Tenant}/members/, and starts the renewal loop. It blocks for
// the two RPCs, bounded by ctx. It returns a *ConfigError (ErrInvalidConfig; for an
// invalid Tenant it unwraps to a *coord.NameError) for invalid configuration, and the
// etcd error otherwise — matching coord.ErrNoLeader (retryable) when the member
// reached has no leader; on error nothing is left behind. ctx is not retained: the
// session lives until Close or loss of authority.
func NewSession(ctx context.Context, cli *clientv3.Client, cfg Config) (*Session, error) {
	if cli == nil {
		return nil, &ConfigError{Field: "client", Reason: "nil *clientv3.Client"}
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.keepAliveOnce == nil {
		cfg.keepAliveOnce = cli.KeepAliveOnce
	}
	s := newSessionState(cli, cfg)
	if cfg.PrivateWatches {
		s.plane = watchplane.New(cli, watchplane.Config{Clock: cfg.Clock, Logger: cfg.Logger, MeterProvider: cfg.MeterProvider})
	} else {
		s.plane = watchplane.For(cli, cfg.Clock)
	}
	ctx, span := s.in.tracer.Start(ctx, "correctnesslease.NewSession",
		trace.WithAttributes(attribute.String(coord.AttrTenant, cfg.Tenant)))
	defer span.End()

	// The renewal clock starts when the grant is sent: etcd starts the TTL when
	// it applies the grant, which is later.
	sent := cfg.Clock.Now()
	// Require a leader: a member cut off from its quorum answers at once
	// (coord.ErrNoLeader, retryable) instead of holding the grant until ctx ends.
	grant, err := cli.Grant(clientv3.WithRequireLeader(ctx), int64(math.Ceil(cfg.TTL.Seconds())))
	if err != nil {
		s.closePlane()
		err = etcderr.Classify(err)
		span.SetStatus(codes.Error, err.Error())
		return nil, fmt.Errorf("correctnesslease: grant lease: %w", err)
	}
	s.id = grant.ID
	member, err := coord.Key(cfg.Tenant, coord.KindMembers, "session-"+strconv.FormatInt(int64(grant.ID), 16))
	if err == nil {
		s.member = member
		host, _ := os.Hostname()
		s.memberValue = host + " pid " + strconv.Itoa(os.Getpid())
		var put *clientv3.PutResponse
		if put, err = cli.Put(ctx, member, s.memberValue, clientv3.WithLease(grant.ID)); err == nil {
			s.guard.Store(put.Header.Revision)
		}
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.KeepaliveTimeout)
		_, _ = cli.Revoke(rctx, grant.ID)
		cancel()
		s.closePlane()
		return nil, fmt.Errorf("correctnesslease: attach session key: %w", err)
	}
	span.SetAttributes(attribute.String(attrLeaseID, strconv.FormatInt(int64(grant.ID), 16)))
	s.start(sent)
	cfg.Logger.Debug("correctnesslease: session started", "tenant", cfg.Tenant, "lease_id", strconv.FormatInt(int64(grant.ID), 16), "ttl", cfg.TTL)
	return s, nil
}

// newSessionState builds a session without any RPC; start begins its renewal.
func newSessionState(cli *clientv3.Client, cfg Config) *Session {
	s := &Session{
		cli:    cli,
		cfg:    cfg,
		in:     newInstruments(cfg),
		done:   make(chan struct{}),
		leases: map[*Lease]struct{}{},
		keys:   map[string]*Lease{},
	}
	s.queues = &groupCommit[*Lease, queued]{s: s, send: s.queue}
	s.deletes = &groupCommit[*Lease, error]{s: s, send: s.deleteKeys}
	return s
}

// start begins the renewal loop; granted is when the lease grant was sent.
func (s *Session) start(granted time.Time) {
	s.lastRenewed = granted
	s.stopCtx, s.stop = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.renew(granted)
}

// LeaseID returns the etcd lease of the session. It does not block.
func (s *Session) LeaseID() clientv3.LeaseID { return s.id }

// Tenant returns the tenant the session's keys live under. It does not block.
func (s *Session) Tenant() string { return s.cfg.Tenant }

// TTL returns the session's configured TTL. It does not block.
func (s *Session) TTL() time.Duration { return s.cfg.TTL }

// Done returns a channel closed when the session has lost its authority: the
// renewal deadline passed (step-down), etcd reported the lease gone, or Close was
// called. Every Lease on the session has lost its authority by then.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns nil while the session has authority, and afterwards the
// *coord.AuthorityLostError (matching coord.ErrAuthorityLost) that says why it
// was lost (LossRenewalDeadline, LossSessionExpired or LossReleased).
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		return nil
	}
	return s.err
}

// Close ends the session: every Lease on it loses authority with LossReleased
// (their contexts are cancelled first), the renewal loop stops, and the etcd
// lease is revoked so that etcd deletes every key of the session at once and the
// next waiters take over without waiting for the TTL. It blocks for the revoke,
// bounded by ctx, and until the session's goroutines have ended. It returns the
// revoke error, if any (the lease then expires on its own within the TTL).
// Calling Close again returns nil.
func (s *Session) Close(ctx context.Context) error {
	first := false
	s.stopOnce.Do(func() { first = true; s.stop() })
	if !first {
		s.wg.Wait()
		return nil
	}
	s.lose(coord.LossReleased, nil)
	s.wg.Wait()
	s.closePlane()
	if s.lostReason() == coord.LossSessionExpired || s.cli == nil {
		return nil // etcd already said the lease is gone
	}
	ctx, span := s.in.tracer.Start(ctx, "correctnesslease.Session.Close")
	defer span.End()
	if _, err := s.cli.Revoke(ctx, s.id); err != nil && !isLeaseGone(err) {
		span.SetStatus(codes.Error, err.Error())
		return fmt.Errorf("correctnesslease: revoke session lease: %w", err)
	}
	return nil
}

// closePlane closes the session's own watch plane (Config.PrivateWatches); a
// shared one ends with its client.
func (s *Session) closePlane() {
	if s.cfg.PrivateWatches && s.plane != nil {
		s.plane.Close()
	}
}

// lose ends the session's authority with reason (first call wins): it cancels
// every lease, then closes done. It reports whether this call did it.
func (s *Session) lose(reason coord.LossReason, cause error) bool {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return false
	}
	s.err = &coord.AuthorityLostError{Reason: reason, Err: cause}
	leases := make([]*Lease, 0, len(s.leases))
	for l := range s.leases {
		leases = append(leases, l)
	}
	s.mu.Unlock()
	for _, l := range leases {
		l.lose(reason, cause)
	}
	close(s.done)
	if reason != coord.LossReleased {
		s.cfg.Logger.Warn("correctnesslease: session lost authority", "tenant", s.cfg.Tenant,
			"lease_id", strconv.FormatInt(int64(s.id), 16), "reason", string(reason), "err", cause)
	}
	return true
}

// register adds a waiting lease; it fails when the session has lost authority
// or already holds key. On success it counts one goroutine in s.wg (under s.mu,
// so never after Close has started waiting).
func (s *Session) register(l *Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if _, dup := s.keys[l.key]; dup {
		return fmt.Errorf("%w: %s", ErrAlreadyQueued, l.prefix)
	}
	s.leases[l] = struct{}{}
	s.keys[l.key] = l
	s.wg.Add(1) // for the lease's key watcher; acquire calls Done if it never starts
	return nil
}

func (s *Session) unregister(l *Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.leases, l)
	if s.keys[l.key] == l {
		delete(s.keys, l.key)
	}
}

// keyFor returns this session's key under an election prefix.
func (s *Session) keyFor(prefix string) string {
	return prefix + "/" + strconv.FormatInt(int64(s.id), 16)
}

// settle runs try, which reports whether an outcome in etcd is settled, once in
// the caller's goroutine and, if it is not, again in the background with backoff
// for as long as the session has authority: once the session is lost or closed,
// its etcd lease (revoked, or expiring within the TTL) takes every key of the
// session with it. then, if not nil, runs after the last try.
func (s *Session) settle(try func() bool, then func()) {
	if try() {
		if then != nil {
			then()
		}
		return
	}
	s.mu.Lock()
	lost := s.err != nil
	if !lost {
		s.wg.Add(1) // under s.mu: never after Close started waiting
	}
	s.mu.Unlock()
	if lost {
		if then != nil {
			then()
		}
		return
	}
	go func() {
		defer s.wg.Done()
		if then != nil {
			defer then()
		}
		for attempt := 0; ; attempt++ {
			if (coord.Backoff{Base: 50 * time.Millisecond, Cap: time.Second, Rand: s.cfg.backoffRand}).Wait(s.stopCtx, s.cfg.Clock, attempt) != nil {
				return
			}
			if try() {
				return
			}
		}
	}()
}

// raiseGuard records a newer mod revision of the member key.
func (s *Session) raiseGuard(rev int64) {
	for {
		cur := s.guard.Load()
		if rev <= cur || s.guard.CompareAndSwap(cur, rev) {
			return
		}
	}
}

func (s *Session) lostReason() coord.LossReason {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		return ""
	}
	return s.err.Reason
}
