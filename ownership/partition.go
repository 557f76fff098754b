package ownership

import (
	"context"
	"sync"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
)

// Partition is one partition held by this member: a correctnesslease.Lease
// named LeaseName(group, ID()) on the member's session. Safe for concurrent use.
type Partition struct {
	id     int
	lease  *correctnesslease.Lease
	ctx    context.Context
	cancel context.CancelCauseFunc
	ack    chan struct{} // closed by Done
	once   sync.Once
}

func newPartition(id int, l *correctnesslease.Lease) *Partition {
	p := &Partition{id: id, lease: l, ack: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancelCause(l.Context())
	return p
}

// ID returns the partition number, in [0, Partitions). It does not block.
func (p *Partition) ID() int { return p.id }

// Token returns the partition's fencing token, minted by correctnesslease for
// the partition's own lease (LeaseName): send it with every write of the
// partition to a resource that rejects older tokens (pgfence: one fence row per
// partition). It stays the same after the partition is revoked or lost, so a
// late write is rejected as stale. It does not block.
func (p *Partition) Token() coord.Token { return p.lease.Token() }

// Context returns a context cancelled when this member must stop acting as the
// partition's owner, always before anyone else can acquire it: at a planned
// revoke (context.Cause is a *RevokedError; the key is held until Done or the
// DrainTimeout) or at a loss (cause *coord.AuthorityLostError: step-down at 2/3
// TTL of failed renewal, session expiry, key deleted, Close).
func (p *Partition) Context() context.Context { return p.ctx }

// Valid reports whether this member may still serve reads as the partition's
// owner right now: the context is live and, on the session's monotonic clock,
// the last confirmed renewal is less than 2/3 TTL old (a process resumed from a
// pause past that sees false even before its renewal loop has run). It does not
// block. Once false it stays false.
func (p *Partition) Valid() bool { return p.ctx.Err() == nil && p.lease.Valid() }

// Done acknowledges a revoke: the partition's work has stopped, so its key is
// released now instead of at the DrainTimeout. Calling it before a revoke
// makes the future revoke release at once; calling it again does nothing. It
// does not block.
func (p *Partition) Done() { p.once.Do(func() { close(p.ack) }) }
