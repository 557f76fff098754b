package ownership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/internal/etcderr"
	"github.com/coordkit/coordkit/membership"
)

// ErrAlreadyJoined is returned (wrapped) by Join when the session is already a
// member of the group: a session joins a group at most once.
var ErrAlreadyJoined = errors.New("ownership: session already a member of this group")

// Member is this process's membership of a group, on one correctnesslease
// Session: its member key and every partition key are attached to the
// session's etcd lease, so the member costs one keepalive per TTL/3 however many
// partitions it holds, and no etcd call per operation. A member ends at Leave,
// Close, or when its session loses its authority (then every partition is
// revoked with ReasonSessionLost; Join again on a new Session to come back).
// Safe for concurrent use.
type Member struct {
	g      *Group
	s      *correctnesslease.Session
	id     string
	key    string // the member key
	keyRev int64  // its create revision
	log    *slog.Logger
	in     *instruments

	events   chan Event
	dropped  atomic.Int64
	rpcs     chan struct{} // cap Config.MaxAcquiring: acquisitions queueing
	releases chan struct{} // cap maxConcurrentReleases: releases in flight

	ctx      context.Context // cancelled when the member stops: ends the loop and acquisitions
	cancel   context.CancelFunc
	hurry    chan struct{} // closed by Close: revoked partitions skip the drain
	closeBy  time.Time     // set before hurry is closed: the deadline of Close's releases
	hurryOne sync.Once
	slotsWG  sync.WaitGroup // the partition goroutines
	loopDone chan struct{}
	done     chan struct{} // closed when everything has stopped

	mu      sync.Mutex
	target  target
	slots   map[int]*slot
	leaving bool
	stopped bool          // no new partition is acquired
	idle    chan struct{} // closed when slots is empty and leaving
}

// Join registers this process as a member of the group on session s and starts
// acquiring the partitions the assignment gives it; it returns once registered,
// not once partitions are acquired (watch Events or Owned). The member key
// /tenants/{t}/members/ownership.{group}/{member id} (membership's format, meta as
// its metadata) and every partition key are attached to s's etcd lease: one
// keepalive per TTL/3 for everything. s must be of the group's tenant and must
// outlive the member; the member ends when s loses its authority.
//
// It blocks for one transaction, bounded by ctx; ctx is not retained. It returns
// a *ConfigError for a nil or foreign session, invalid meta, or a group whose
// target in etcd has another Partitions count; ErrAlreadyJoined when s is already
// a member; an error wrapping ErrClosed when s has lost its authority; ctx's
// cause when ctx has ended; the etcd error otherwise (classified: coord.ErrNoLeader
// matches when etcd has no leader). On error nothing is left behind.
func (g *Group) Join(ctx context.Context, s *correctnesslease.Session, meta map[string]string) (_ *Member, err error) {
	if s == nil {
		return nil, &ConfigError{Field: "session", Reason: "nil *correctnesslease.Session"}
	}
	if s.Tenant() != g.cfg.Tenant {
		return nil, &ConfigError{Field: "session", Reason: "session of tenant " + strconv.Quote(s.Tenant()) + ", group of " + strconv.Quote(g.cfg.Tenant)}
	}
	if cause := context.Cause(ctx); cause != nil {
		return nil, fmt.Errorf("ownership: join %s: %w", g.cfg.Group, cause)
	}
	if serr := s.Err(); serr != nil {
		return nil, fmt.Errorf("ownership: join %s: %w: %w", g.cfg.Group, ErrClosed, serr)
	}
	id := strconv.FormatInt(int64(s.LeaseID()), 16)
	key, value, err := membership.Config{Tenant: g.cfg.Tenant, Service: g.keys.service, Instance: id, Metadata: meta}.Record()
	if err != nil {
		return nil, &ConfigError{Field: "meta", Reason: err.Error(), Err: err}
	}
	ctx, span := g.cfg.TracerProvider.Tracer(instrumentation).Start(ctx, "ownership.Join", trace.WithAttributes(
		attribute.String(coord.AttrTenant, g.cfg.Tenant), attribute.String(attrGroup, g.cfg.Group),
		attribute.String(attrMember, id)))
	defer func() {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()

	resp, err := g.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, value, clientv3.WithLease(s.LeaseID())), clientv3.OpGet(g.keys.target, clientv3.WithPrefix())).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("ownership: join %s: %w", g.cfg.Group, etcderr.Classify(err))
	}
	if !resp.Succeeded {
		return nil, fmt.Errorf("%w: %s (member %s)", ErrAlreadyJoined, g.cfg.Group, id)
	}
	m := &Member{
		g: g, s: s, id: id, key: key, keyRev: resp.Header.Revision,
		log:      g.cfg.Logger.With("tenant", g.cfg.Tenant, "group", g.cfg.Group, "member", id),
		events:   make(chan Event, min(2*g.cfg.Partitions, 4096)+16),
		hurry:    make(chan struct{}),
		loopDone: make(chan struct{}),
		done:     make(chan struct{}),
		slots:    map[int]*slot{},
		rpcs:     make(chan struct{}, g.cfg.MaxAcquiring),
		releases: make(chan struct{}, maxConcurrentReleases),
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	if t, rev, found, derr := readTarget(resp.Responses[1].GetResponseRange().Kvs, g.keys.target); found {
		switch {
		case derr != nil:
			m.log.Warn("ownership: malformed target; it will be rewritten", "err", derr)
			m.target = target{Revision: rev}
		case t.Partitions != g.cfg.Partitions:
			m.cancel()
			m.deleteKey(ctx)
			return nil, &ConfigError{Field: "Partitions", Reason: fmt.Sprintf("%d, but group %s has %d", g.cfg.Partitions, g.cfg.Group, t.Partitions)}
		default:
			m.target = t
		}
	}
	m.in = newInstruments(g.cfg, id, m.counts)
	go m.run(resp.Header.Revision)
	go m.finish()
	m.log.Info("ownership: joined", "partitions", g.cfg.Partitions)
	return m, nil
}

// ID returns the member id: the session's etcd lease id in hex, also the last
// segment of the member's partition keys. It does not block.
func (m *Member) ID() string { return m.id }

// Owned returns the partitions this member holds and has not been told to give
// up (their Context is live), sorted by ID. It does not block.
func (m *Member) Owned() []*Partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Partition
	for _, sl := range m.slots {
		if sl.part != nil && !sl.revoked && sl.part.ctx.Err() == nil {
			out = append(out, sl.part)
		}
	}
	slices.SortFunc(out, func(a, b *Partition) int { return a.id - b.id })
	return out
}

// Events returns the member's Acquired and Revoked events, in order per
// partition. The channel is buffered (2 per partition, at most 4096+16) and the
// member never blocks on it: when it is full an event is dropped (counted by
// Dropped, and logged), so a reader that falls behind must resync from Owned,
// which is always current. It is closed once the member has stopped and every
// partition has been released.
func (m *Member) Events() <-chan Event { return m.events }

// Dropped returns how many events were dropped because Events was full. It
// does not block.
func (m *Member) Dropped() int64 { return m.dropped.Load() }

// Done returns a channel closed once the member has stopped (Leave, Close or
// loss of the session) and released every partition.
func (m *Member) Done() <-chan struct{} { return m.done }

// emit delivers an event without blocking.
func (m *Member) emit(kind EventKind, p *Partition, reason Reason) {
	select {
	case m.events <- Event{Kind: kind, Partition: p, Reason: reason}:
	default:
		m.dropped.Add(1)
		m.log.Warn("ownership: event dropped (Events full)", "kind", kind.String(), "partition", p.id, "reason", string(reason))
	}
}

// counts reports (held, assigned but not held) for the gauges.
func (m *Member) counts() (int, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	held, pending := 0, 0
	for p, o := range m.target.Owners {
		sl := m.slots[p]
		switch {
		case sl != nil && sl.part != nil:
			held++
		case o == m.id:
			pending++
		}
	}
	return held, pending
}

// Leave hands every partition off and deregisters: it deletes the member key
// (guarded by its create revision) and writes the target without this member
// (two more requests),
// so the new owners queue for the partitions at once; then every partition is
// revoked (cause *RevokedError, ReasonLeave), drained (until Partition.Done or
// the DrainTimeout) and released, the new owner acquiring it as its key goes.
// It blocks until every partition is released, bounded by ctx; when ctx ends
// first it releases the rest at once (as Close) and returns ctx's cause. It
// returns an error wrapping ErrClosed when the member had stopped already. The
// session is left open.
func (m *Member) Leave(ctx context.Context) error {
	m.mu.Lock()
	if m.stopped || m.leaving {
		m.mu.Unlock()
		return fmt.Errorf("ownership: leave %s: %w", m.g.cfg.Group, ErrClosed)
	}
	m.leaving = true
	m.idle = make(chan struct{})
	m.mu.Unlock()
	ctx, span := m.in.tracer.Start(ctx, "ownership.Leave", trace.WithAttributes(attribute.String(attrMember, m.id)))
	defer span.End()

	m.deleteKey(ctx)
	// Best effort: if this fails, the others write the target when they see
	// the member key go.
	if members, prev, err := m.readState(ctx); err == nil && prev.Partitions == m.g.cfg.Partitions {
		if _, err := m.writeTarget(ctx, prev, assign(prev.Owners, members)); err != nil {
			m.log.Warn("ownership: leave: target write failed; the others will write it", "err", err)
		}
	}
	m.mu.Lock()
	m.reconcileLocked()
	m.checkIdleLocked()
	idle := m.idle
	m.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
		err := context.Cause(ctx)
		span.SetStatus(codes.Error, err.Error())
		_ = m.Close()
		return fmt.Errorf("ownership: leave %s: %w", m.g.cfg.Group, err)
	}
	m.stop()
	<-m.done
	m.log.Info("ownership: left")
	return nil
}

// Close stops the member at once, without a handoff: every partition's context
// is cancelled (cause *coord.AuthorityLostError, LossReleased; event reason
// ReasonClosed), its key released without waiting for Done, and the member key
// deleted, so the new owners acquire without waiting for the TTL (like a crash,
// but clean). It blocks until that is done, at most about one TTL (keys it
// could not delete by then, etcd being unreachable, go with the session's
// lease). The session is left open. Calling Close again returns nil.
func (m *Member) Close() error {
	m.hurryOne.Do(func() { m.closeBy = time.Now().Add(m.s.TTL()); close(m.hurry) })
	m.stop()
	<-m.done
	ctx, cancel := context.WithTimeout(context.Background(), m.s.TTL()/3)
	defer cancel()
	m.deleteKey(ctx)
	return nil
}

// stop ends the member: no new acquisition, every partition revoked (Close:
// released at once), the loop stopped.
func (m *Member) stop() {
	m.mu.Lock()
	if !m.stopped {
		m.stopped = true
		m.reconcileLocked()
	}
	m.mu.Unlock()
	m.cancel()
}

// finish closes Events and done once the loop and every partition goroutine
// have ended.
func (m *Member) finish() {
	<-m.loopDone
	m.mu.Lock()
	m.stopped = true // the loop ends only when stopping: no slot restarts
	m.mu.Unlock()
	m.slotsWG.Wait()
	m.in.close()
	close(m.events)
	close(m.done)
}

// deleteKey deletes the member key if it is still ours; failures are logged
// (the key goes with the session's lease anyway).
func (m *Member) deleteKey(ctx context.Context) {
	_, err := m.g.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(m.key), "=", m.keyRev)).
		Then(clientv3.OpDelete(m.key)).Commit()
	if err != nil {
		m.log.Warn("ownership: could not delete the member key (it goes with the session's lease)", "err", etcderr.Classify(err))
	}
}
