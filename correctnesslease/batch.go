package correctnesslease

import (
	"context"
	"sync"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxBatch bounds the keys one transaction of a group commit writes: a queue
// transaction has two operations per key (the put and the read of the queue),
// under etcd's default --max-txn-ops of 128.
const maxBatch = 64

// groupCommit commits the transactions of concurrent callers on one session
// together: the first request is sent at once, and the requests that arrive
// while a transaction is in flight go in the next, up to maxBatch each. A member
// given a thousand partitions queues them in sixteen transactions instead of a
// thousand, and releases them likewise; one caller alone costs what it always
// did. send commits one batch under ctx and returns one result per request.
type groupCommit[In, Out any] struct {
	s    *Session
	send func(ctx context.Context, batch []In) []Out

	mu      sync.Mutex
	pending []*commitReq[In, Out]
	flying  bool // a flush goroutine is sending
}

type commitReq[In, Out any] struct {
	in  In
	ctx context.Context
	res chan Out // cap 1
}

// do commits in and returns its result. Alone, it commits in the caller's
// goroutine, under ctx, at once (one Acquire costs one transaction and no
// handoff); while a transaction is in flight it joins the next batch, and when
// ctx ends first it returns false: the outcome is then unknown (the transaction
// may still apply), as for a transaction of its own. It returns false at once,
// sending nothing, once the session has lost its authority.
func (g *groupCommit[In, Out]) do(ctx context.Context, in In) (Out, bool) {
	var zero Out
	g.mu.Lock()
	if !g.flying {
		if !g.s.track() {
			g.mu.Unlock()
			return zero, false
		}
		g.flying = true
		g.mu.Unlock()
		out := g.send(ctx, []In{in})[0]
		g.handOff()
		return out, true
	}
	r := &commitReq[In, Out]{in: in, ctx: ctx, res: make(chan Out, 1)}
	g.pending = append(g.pending, r)
	g.mu.Unlock()
	select {
	case out := <-r.res:
		return out, true
	case <-ctx.Done():
		return zero, false
	}
}

// handOff ends a commit made in a caller's goroutine: the requests that queued
// behind it go to a flush goroutine (which takes over its count in s.wg), or,
// none waiting, the commit is over.
func (g *groupCommit[In, Out]) handOff() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) == 0 {
		g.flying = false
		g.s.wg.Done()
		return
	}
	go g.flush()
}

// flush sends the pending requests, a batch at a time, until none is left.
// Requests whose context has ended are dropped unsent: their caller has
// returned.
func (g *groupCommit[In, Out]) flush() {
	defer g.s.wg.Done()
	for {
		g.mu.Lock()
		var batch []*commitReq[In, Out]
		for len(g.pending) > 0 && len(batch) < maxBatch {
			r := g.pending[0]
			g.pending = g.pending[1:]
			if r.ctx.Err() == nil {
				batch = append(batch, r)
			}
		}
		if len(batch) == 0 {
			g.flying = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		g.commit(batch)
	}
}

// commit sends one batch. Its context ends when every request in it has given
// up (or the session stops), so one caller's end does not cut the others'
// transaction.
func (g *groupCommit[In, Out]) commit(batch []*commitReq[In, Out]) {
	ctx, cancel := context.WithCancel(g.s.stopCtx)
	defer cancel()
	var live atomic.Int64
	live.Store(int64(len(batch)))
	ins := make([]In, len(batch))
	for i, r := range batch {
		ins[i] = r.in
		stop := context.AfterFunc(r.ctx, func() {
			if live.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	for i, out := range g.send(ctx, ins) {
		batch[i].res <- out
	}
}

// track counts one more goroutine in s.wg, under s.mu so never after Close has
// started waiting; it reports false once the session has lost its authority.
func (s *Session) track() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false
	}
	s.wg.Add(1)
	return true
}

// queueBatched queues l's key through the session's group commit (see queue).
// When ctx ends first, or the session is lost, the outcome is unknown: it
// returns ctx's cause (or the loss), and the caller fences the key.
func (l *Lease) queueBatched(ctx context.Context) queued {
	q, ok := l.s.queues.do(ctx, l)
	if !ok {
		if err := context.Cause(ctx); err != nil {
			return queued{err: err}
		}
		return queued{err: l.s.Err()}
	}
	return q
}

// deleteBatched deletes l's key, if it is still this lease's (its create
// revision is the token), through the session's group commit; the result is
// the transaction's error. When ctx ends first the delete may or may not apply.
func (l *Lease) deleteBatched(ctx context.Context) error {
	err, ok := l.s.deletes.do(ctx, l)
	if !ok {
		if cerr := context.Cause(ctx); cerr != nil {
			return cerr
		}
		return l.deleteKey(ctx) // the session is lost: its lease takes the key, try anyway
	}
	return err
}

// deleteKeys deletes each lease's key if its create revision is still the
// lease's token, in one transaction. When one of them is no longer the lease's
// (deleted, or a newer term's), the transaction does not apply and each key is
// deleted by a guarded transaction of its own (the failure and the retry are
// both per key: a stale Release never deletes a newer holder's key, etcd
// issue 22082).
func (s *Session) deleteKeys(ctx context.Context, ls []*Lease) []error {
	out := make([]error, len(ls))
	if len(ls) == 1 {
		out[0] = ls[0].deleteKey(ctx)
		return out
	}
	cmps := make([]clientv3.Cmp, len(ls))
	ops := make([]clientv3.Op, len(ls))
	for i, l := range ls {
		cmps[i] = clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)
		ops[i] = clientv3.OpDelete(l.key)
	}
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	switch {
	case err != nil:
		for i := range out {
			out[i] = err
		}
	case !resp.Succeeded:
		for i, l := range ls {
			out[i] = l.deleteKey(ctx)
		}
	}
	return out
}
