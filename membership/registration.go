package membership

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/etcderr"
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
		closed := r.ctx.Err() != nil // the session's Close ended the wait or the put
		s.remove(r)
		r.cancel()
		if closed && !errors.Is(err, ErrClosed) {
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
