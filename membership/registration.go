package membership

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/etcderr"
	"github.com/coordkit/coordkit/internal/watchplane"
)

// LossKeyOverwritten: someone else put the instance's key (an operator, or a
// second process registering the same instance name). The other reasons a
// registration is lost are coord.LossSessionExpired (etcd says the lease is
// gone) and coord.LossKeyDeleted.
const LossKeyOverwritten coord.LossReason = "key_overwritten"

// Loss is why and when a registration was last lost.
type Loss struct {
	Reason coord.LossReason // coord.LossSessionExpired, coord.LossKeyDeleted or LossKeyOverwritten
	Err    error            // what was observed
	At     time.Time        // on the session's clock
}

// Status is a snapshot of a Registration.
type Status struct {
	// Registered is Registration.Registered.
	Registered bool
	// Lease, CreateRevision and ModRevision describe the key as this
	// registration last wrote it; Lease is 0 while the key is lost.
	Lease          clientv3.LeaseID
	CreateRevision int64
	ModRevision    int64
	// Registrations counts successful puts of the key after it was absent or
	// lost, Register's own included: Registrations-1 re-registrations.
	Registrations int
	// Losses counts the losses noticed; LastLoss describes the latest.
	Losses   int
	LastLoss Loss
	// Closed is true after Deregister or Session.Close.
	Closed bool
}

// Registration is one instance's key under a lease, kept there: whenever it is
// lost — the lease expired or was revoked, the key was deleted or overwritten —
// it is put again (under a new lease if the old one is gone), with full-jitter
// backoff and no retry cap, until Deregister. Safe for concurrent use.
type Registration struct {
	s     *Session
	inst  instance
	attrs attribute.Set // tenant, service, instance: the registered gauge
	svc   attribute.Set // tenant, service: losses and recovery times
	reqs  chan *updateReq

	ctx      context.Context // cancelled by stopLoop: ends the loop's RPCs
	cancel   context.CancelFunc
	stopc    chan struct{}
	done     chan struct{} // closed when the loop has returned
	stopOnce sync.Once

	attempt int // loop-owned: re-put attempts since the last stable registration

	mu           sync.Mutex
	value        string // what the next put writes
	g            *grant // the lease of the key in etcd; nil while lost
	createRev    int64
	modRev       int64
	stableSince  time.Time // when the key was last put
	lostAt       time.Time // when the current loss was noticed
	deregistered bool      // Deregister's delete (or revoke) succeeded
	started      bool      // Register started the loop
	st           Status
	changed      chan struct{}
}

type updateReq struct {
	ctx   context.Context
	value string
	reply chan error
}

// Register puts the instance key /tenants/{Tenant}/members/{Service}/{Instance}
// with cfg.Addr and cfg.Metadata under a lease of its own (a Session made from
// cfg.SessionConfig, closed by Deregister) and keeps it registered until
// Deregister. It blocks for the grant and the put, bounded by ctx. It returns a
// *ConfigError (ErrInvalidConfig) for an invalid name (unwrapping to the
// *coord.NameError, so coord.ErrInvalidName matches too), configuration or
// metadata, a *coord.QuotaError (coord.ErrQuotaExceeded) when the value or the
// write rate exceeds the tenant's quota, and the etcd error otherwise; on error
// nothing is left behind. An existing key of the same name (a previous incarnation whose
// lease has not expired yet) is overwritten.
func Register(ctx context.Context, cli *clientv3.Client, cfg Config) (*Registration, error) {
	inst, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	s, err := NewSession(ctx, cli, cfg.SessionConfig)
	if err != nil {
		return nil, err
	}
	s.private = true
	r, err := s.register(ctx, inst)
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RequestTimeout)
		defer cancel()
		_ = s.Close(cctx)
		return nil, err
	}
	return r, nil
}

// Register registers an instance on the session's lease; cfg.SessionConfig must
// be zero. Otherwise it is the package's Register: same blocking, errors and
// guarantees. Deregister removes only this instance's key.
func (s *Session) Register(ctx context.Context, cfg Config) (*Registration, error) {
	if !cfg.SessionConfig.isZero() {
		return nil, &ConfigError{Field: "SessionConfig", Reason: "set on a registration of a shared Session; configure the Session instead"}
	}
	inst, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	return s.register(ctx, inst)
}

func (s *Session) register(ctx context.Context, inst instance) (_ *Registration, err error) {
	ctx, span := s.in.tracer.Start(ctx, "membership.Register", trace.WithAttributes(
		attribute.String(coord.AttrTenant, inst.tenant), attribute.String(attrService, inst.service),
		attribute.String(attrInstance, inst.name)))
	defer func() {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	if err := s.cfg.Quotas.AllowWrite(inst.key, 0, len(inst.value)); err != nil {
		return nil, fmt.Errorf("membership: register %s: %w", inst.key, err)
	}
	r := &Registration{
		s:    s,
		inst: inst,
		attrs: attribute.NewSet(attribute.String(coord.AttrTenant, inst.tenant),
			attribute.String(attrService, inst.service), attribute.String(attrInstance, inst.name)),
		svc:     attribute.NewSet(attribute.String(coord.AttrTenant, inst.tenant), attribute.String(attrService, inst.service)),
		reqs:    make(chan *updateReq),
		stopc:   make(chan struct{}),
		done:    make(chan struct{}),
		value:   inst.value,
		changed: make(chan struct{}),
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	if err := s.add(r); err != nil {
		r.cancel()
		return nil, err
	}
	// A Session.Close meanwhile ends the wait and the put.
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(r.ctx, cancel)()
	g, err := r.firstPut(pctx)
	r.mu.Lock()
	if err == nil && r.st.Closed {
		err = ErrClosed // the session's Close revokes the lease, and the key with it
	}
	r.started = err == nil
	r.mu.Unlock()
	if err != nil {
		s.remove(r)
		r.cancel()
		if r.ctx.Err() != nil && !errors.Is(err, ErrClosed) {
			err = fmt.Errorf("%w: %w", ErrClosed, err)
		}
		if g != nil && !s.private && !errors.Is(err, coord.ErrQuotaExceeded) {
			r.deleteUnknown(ctx, g) // the put may have been applied
		}
		return nil, fmt.Errorf("membership: register %s: %w", inst.key, etcderr.Classify(err))
	}
	span.SetAttributes(attribute.Int64(attrLeaseID, int64(g.id)), attribute.Int64(attrCreateRevision, r.createRev))
	go r.run()
	return r, nil
}

// firstPut puts the key under the session's live lease, bounded by ctx. When
// etcd says that lease is gone it waits for the session's next one and tries
// again: a shared session's loss is not the caller's error. It returns the
// lease of the last attempt.
func (r *Registration) firstPut(ctx context.Context) (*grant, error) {
	for {
		g, ready, ok := r.s.lease()
		switch {
		case !ok:
			return nil, ErrClosed
		case g == nil:
			select {
			case <-ready:
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
			continue
		}
		err := r.put(ctx, g)
		if !isLeaseGone(err) {
			return g, err
		}
		r.s.reportLost(g.id)
		select {
		case <-g.lost:
		case <-ctx.Done():
			return g, context.Cause(ctx)
		}
	}
}

// Key returns the registration's etcd key. It does not block.
func (r *Registration) Key() string { return r.inst.key }

// Registered reports whether the key is in etcd as this registration last
// wrote it, under a lease confirmed alive within the last TTL (a keepalive or
// grant sent less than a TTL ago succeeded). It turns false as soon as a loss
// is noticed or the lease may have expired unnoticed (etcd unreachable for a
// TTL), and true again once re-registered or renewed. It does not block.
func (r *Registration) Registered() bool {
	r.mu.Lock()
	g, closed := r.g, r.st.Closed
	r.mu.Unlock()
	if g == nil || closed {
		return false
	}
	select {
	case <-g.lost: // the loop has not processed the loss yet
		return false
	default:
	}
	return r.s.isConfirmed()
}

// Status returns a snapshot of the registration. It does not block.
func (r *Registration) Status() Status {
	r.mu.Lock()
	st := r.st
	if r.g != nil {
		st.Lease, st.CreateRevision, st.ModRevision = r.g.id, r.createRev, r.modRev
	}
	r.mu.Unlock()
	st.Registered = r.Registered()
	return st
}

// Changed returns a channel closed at the next change of Status (a loss, a
// re-registration, an Update, the lease unconfirmed or confirmed again,
// Deregister). Read Status after it fires; call Changed again for the next
// change. Changes between two reads coalesce, but Registrations and Losses
// count every one.
func (r *Registration) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

func (r *Registration) notify() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notifyLocked()
}

func (r *Registration) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Update replaces the registration's metadata (the address stays). It blocks
// for one guarded put — it applies only while the key is still this
// registration's — bounded by ctx. It returns nil once the new metadata is in
// etcd; an error matching ErrNotRegistered when the key is lost at the moment
// (the new metadata is kept and written by the re-registration); a
// *ConfigError or *coord.QuotaError for invalid or oversized metadata or an
// exhausted write rate (nothing changes); ErrClosed after Deregister; the etcd
// error otherwise (the put may or may not have applied; the new metadata is
// kept for the next put either way). The map is not retained.
func (r *Registration) Update(ctx context.Context, metadata map[string]string) error {
	v, err := encodeValue(r.inst.addr, metadata)
	if err != nil {
		return err
	}
	if err := r.s.cfg.Quotas.AllowWrite(r.inst.key, 0, len(v)); err != nil {
		return fmt.Errorf("membership: update %s: %w", r.inst.key, err)
	}
	req := &updateReq{ctx: ctx, value: v, reply: make(chan error, 1)}
	select {
	case r.reqs <- req:
	case <-r.done:
		return fmt.Errorf("membership: update %s: %w", r.inst.key, ErrClosed)
	case <-ctx.Done():
		return fmt.Errorf("membership: update %s: %w", r.inst.key, context.Cause(ctx))
	}
	select {
	case err := <-req.reply:
		return err
	case <-ctx.Done():
		return fmt.Errorf("membership: update %s: %w", r.inst.key, context.Cause(ctx))
	}
}

// Deregister stops keeping the key registered and deletes it — only if it is
// still this registration's (same create revision and lease), so a newer
// registration of the instance name is never removed. For a registration made
// by Register it closes its session (one revoke, which deletes exactly the keys
// attached to the lease). It blocks for that RPC, bounded by ctx, and returns
// its error: the key of a Register'ed instance then expires within the TTL (no
// keepalive renews it); on a shared Session, whose lease stays alive, call
// Deregister again to retry the delete (or Close the session). Once it
// succeeded, calling it again returns nil.
func (r *Registration) Deregister(ctx context.Context) (err error) {
	r.stopLoop()
	r.mu.Lock()
	if r.deregistered {
		r.mu.Unlock()
		return nil
	}
	g, create := r.g, r.createRev
	r.mu.Unlock()
	ctx, span := r.s.in.tracer.Start(ctx, "membership.Deregister", trace.WithAttributes(
		attribute.String(coord.AttrTenant, r.inst.tenant), attribute.String(attrService, r.inst.service),
		attribute.String(attrInstance, r.inst.name)))
	defer func() {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	r.s.remove(r)
	switch {
	case r.s.private:
		err = r.s.Close(ctx) // a second call returns nil: the lease expires unrenewed
	case g != nil: // (nil: lost, whatever is at the key now is not ours)
		rctx, cancel := context.WithTimeout(ctx, r.s.cfg.RequestTimeout)
		defer cancel()
		_, err = r.s.kv.Txn(rctx).
			If(clientv3.Compare(clientv3.CreateRevision(r.inst.key), "=", create),
				clientv3.Compare(clientv3.LeaseValue(r.inst.key), "=", g.id)).
			Then(clientv3.OpDelete(r.inst.key)).Commit()
	}
	if err != nil {
		return fmt.Errorf("membership: deregister %s: %w", r.inst.key, etcderr.Classify(err))
	}
	r.mu.Lock()
	r.deregistered = true
	r.mu.Unlock()
	return nil
}

// stopLoop ends the registration's loop, if Register started it, and waits
// for it.
func (r *Registration) stopLoop() {
	r.stopOnce.Do(func() {
		close(r.stopc)
		r.cancel()
		r.mu.Lock()
		r.st.Closed = true
		started := r.started
		r.notifyLocked()
		r.mu.Unlock()
		if started {
			<-r.done
		}
	})
}

// run keeps the key registered until stopLoop: watch it while it is there,
// put it again when it is lost.
func (r *Registration) run() {
	defer close(r.done)
	for {
		r.mu.Lock()
		g := r.g
		r.mu.Unlock()
		var ok bool
		if g == nil {
			ok = r.reregister()
		} else {
			ok = r.hold(g)
		}
		if !ok {
			return
		}
	}
}

// reregister puts the key again after a loss, waiting a full-jitter backoff
// before each attempt (the attempt count restarts only after the key stayed
// registered for a TTL, so two processes fighting over one instance name slow
// down to the backoff cap), under the session's live lease. It serves Update
// requests meanwhile (they are kept, not written). It returns false when the
// registration stops.
func (r *Registration) reregister() bool {
	clk := r.s.cfg.Clock
	for {
		t := clk.NewTimer(r.s.cfg.Backoff.Delay(r.attempt))
		ok := r.idle(nil, t.C())
		t.Stop()
		if !ok {
			return false
		}
		r.attempt++
		g, ready, ok := r.s.lease()
		for ok && g == nil {
			if !r.idle(ready, nil) {
				return false
			}
			g, ready, ok = r.s.lease()
		}
		if !ok {
			return false
		}
		err := r.put(r.ctx, g)
		if err == nil {
			r.mu.Lock()
			took := clk.Now().Sub(r.lostAt)
			r.mu.Unlock()
			r.s.in.recovered(r.svc, took)
			r.s.cfg.Logger.Info("membership: re-registered", "key", r.inst.key, "lease_id", leaseHex(g.id),
				"after", took, "attempts", r.attempt)
			return true
		}
		if r.ctx.Err() != nil {
			return false
		}
		if isLeaseGone(err) {
			r.s.reportLost(g.id)
		}
		r.s.cfg.Logger.Warn("membership: re-registration failed", "key", r.inst.key, "attempt", r.attempt, "err", err)
		reconnect(r.s.cli)
	}
}

// idle blocks until wake is closed or t fires (either may be nil), serving
// Update requests as "not registered". It returns false when the registration
// stops.
func (r *Registration) idle(wake <-chan struct{}, t <-chan time.Time) bool {
	for {
		select {
		case <-r.stopc:
			return false
		case <-wake:
			return true
		case <-t:
			return true
		case req := <-r.reqs:
			r.store(req)
			req.reply <- fmt.Errorf("membership: update %s: %w (kept for the re-registration)", r.inst.key, ErrNotRegistered)
		}
	}
}

func (r *Registration) store(req *updateReq) {
	r.mu.Lock()
	r.value = req.value
	r.notifyLocked()
	r.mu.Unlock()
}

// put writes the key under g (one Put; the previous value tells the create
// revision) and records it as registered.
func (r *Registration) put(ctx context.Context, g *grant) error {
	r.mu.Lock()
	v := r.value
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, r.s.cfg.RequestTimeout)
	defer cancel()
	resp, err := r.s.kv.Put(ctx, r.inst.key, v, clientv3.WithLease(g.id), clientv3.WithPrevKV())
	if err != nil {
		return err
	}
	create := resp.Header.Revision
	if p := resp.PrevKv; p != nil {
		create = p.CreateRevision
		if p.Lease != int64(g.id) {
			r.s.cfg.Logger.Info("membership: replaced an existing key of the instance (a previous incarnation, or another process with this instance name)",
				"key", r.inst.key, "their_lease_id", leaseHex(clientv3.LeaseID(p.Lease)), "lease_id", leaseHex(g.id))
		}
	}
	now := r.s.cfg.Clock.Now()
	r.mu.Lock()
	r.g, r.createRev, r.modRev = g, create, resp.Header.Revision
	r.stableSince = now
	r.st.Registrations++
	r.notifyLocked()
	r.mu.Unlock()
	return nil
}

// deleteUnknown removes the key after a first put of unknown outcome, if it is
// attached to g (so it can only be that put's).
func (r *Registration) deleteUnknown(ctx context.Context, g *grant) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.s.cfg.RequestTimeout)
	defer cancel()
	_, _ = r.s.kv.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(r.inst.key), "=", g.id)).
		Then(clientv3.OpDelete(r.inst.key)).Commit()
}

// lose records a loss and counts it.
func (r *Registration) lose(reason coord.LossReason, cause error) {
	now := r.s.cfg.Clock.Now()
	r.mu.Lock()
	if now.Sub(r.stableSince) >= r.s.cfg.TTL {
		r.attempt = 0 // it was stable: an isolated loss re-puts at once
	}
	r.g = nil
	r.lostAt = now
	r.st.Losses++
	r.st.LastLoss = Loss{Reason: reason, Err: cause, At: now}
	r.notifyLocked()
	r.mu.Unlock()
	r.s.in.lost(r.svc, reason)
	r.s.cfg.Logger.Warn("membership: registration lost; re-registering", "key", r.inst.key,
		"reason", string(reason), "err", cause)
}

// hold keeps the key while it is registered under g, following it through the
// session's watch plane (one upstream watch for every key of the tenant's
// members in the process). It returns true after a loss (recorded) and false
// when the registration stops. The subscription starts at the revision after
// the last put; a resync (the start, or a compaction) checks the key's state.
func (r *Registration) hold(g *grant) bool {
	r.mu.Lock()
	from := r.modRev + 1
	r.mu.Unlock()
	sub, err := r.s.plane.Subscribe(watchplane.Spec{Key: r.inst.key, From: from,
		RequestTimeout: r.s.cfg.RequestTimeout, Backoff: r.s.cfg.Backoff})
	var ready <-chan struct{}
	if err != nil {
		// The client is closed, or the tenant's watch quota is spent: the key
		// is still kept alive, a loss is seen at the next put or keepalive.
		r.s.cfg.Logger.Warn("membership: cannot follow the instance's key", "key", r.inst.key, "err", err)
	} else {
		defer sub.Close()
		ready = sub.Ready()
	}
	for {
		select {
		case <-r.stopc:
			return false
		case <-g.lost:
			r.lose(coord.LossSessionExpired, fmt.Errorf("lease %s: %w", leaseHex(g.id), rpctypes.ErrLeaseNotFound))
			return true
		case req := <-r.reqs:
			if reason, cause := r.update(g, req); reason != "" {
				r.lose(reason, cause)
				return true
			}
		case <-ready:
			for {
				u, ok := sub.Take()
				if !ok {
					break
				}
				if reason, cause := r.follow(g, u); reason != "" {
					r.lose(reason, cause)
					return true
				}
			}
		}
	}
}

// follow reads one update of the own-key subscription: a put of our own is
// nothing, anything else (a delete, someone else's put, a resync showing the
// key gone or rewritten) is a loss.
func (r *Registration) follow(g *grant, u watchplane.Update) (coord.LossReason, error) {
	if u.Resync {
		r.mu.Lock()
		create, mod := r.createRev, r.modRev
		r.mu.Unlock()
		switch {
		case len(u.KVs) == 0:
			return coord.LossKeyDeleted, fmt.Errorf("key gone at revision %d", u.Revision)
		case u.KVs[0].CreateRevision != create || u.KVs[0].ModRevision != mod || u.KVs[0].Lease != int64(g.id):
			return LossKeyOverwritten, fmt.Errorf("key rewritten at revision %d (lease %s)", u.KVs[0].ModRevision,
				leaseHex(clientv3.LeaseID(u.KVs[0].Lease)))
		}
		return "", nil
	}
	for _, ev := range u.Events {
		if reason, cause := r.classify(ev); reason != "" {
			return reason, cause
		}
	}
	return "", nil
}

// classify reads one event of the own-key watch: a put of our own is nothing,
// anything else is a loss.
func (r *Registration) classify(ev *clientv3.Event) (coord.LossReason, error) {
	if ev.Type == mvccpb.DELETE {
		return coord.LossKeyDeleted, fmt.Errorf("key deleted at revision %d", ev.Kv.ModRevision)
	}
	r.mu.Lock()
	ours := ev.Kv.ModRevision == r.modRev
	r.mu.Unlock()
	if ours {
		return "", nil
	}
	return LossKeyOverwritten, fmt.Errorf("key overwritten at revision %d (lease %s)", ev.Kv.ModRevision, leaseHex(clientv3.LeaseID(ev.Kv.Lease)))
}

// update applies an Update request while the key is registered under g: one
// put, guarded by the key's create revision and lease. It returns a loss
// reason when the guard shows the key is no longer ours.
func (r *Registration) update(g *grant, req *updateReq) (coord.LossReason, error) {
	r.mu.Lock()
	create := r.createRev
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(req.ctx, r.s.cfg.RequestTimeout)
	defer cancel()
	stop := context.AfterFunc(r.ctx, cancel)
	defer stop()
	resp, err := r.s.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(r.inst.key), "=", create),
			clientv3.Compare(clientv3.LeaseValue(r.inst.key), "=", g.id)).
		Then(clientv3.OpPut(r.inst.key, req.value, clientv3.WithLease(g.id))).
		Else(clientv3.OpGet(r.inst.key)).
		Commit()
	switch {
	case errors.Is(err, coord.ErrQuotaExceeded):
		req.reply <- fmt.Errorf("membership: update %s: %w", r.inst.key, err)
		return "", nil
	case err != nil:
		r.store(req)
		if isLeaseGone(err) {
			r.s.reportLost(g.id)
		}
		req.reply <- fmt.Errorf("membership: update %s: %w", r.inst.key, etcderr.Classify(err))
		return "", nil
	}
	r.store(req)
	if !resp.Succeeded {
		req.reply <- fmt.Errorf("membership: update %s: %w (kept for the re-registration)", r.inst.key, ErrNotRegistered)
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return coord.LossKeyDeleted, fmt.Errorf("key gone at revision %d (found by Update)", resp.Header.Revision)
		}
		return LossKeyOverwritten, fmt.Errorf("key rewritten at revision %d (lease %s, found by Update)", kvs[0].ModRevision,
			leaseHex(clientv3.LeaseID(kvs[0].Lease)))
	}
	r.mu.Lock()
	r.modRev = resp.Header.Revision
	r.mu.Unlock()
	req.reply <- nil
	return "", nil
}
