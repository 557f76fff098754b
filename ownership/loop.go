package ownership

import (
	"context"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/etcderr"
)

// run is the member's loop: it follows the membership view and the target key,
// recomputes the target when the view changes (writing it only if it differs:
// nothing in steady state) and reconciles the partitions this member holds with
// the target. It ends when the member stops or its session loses authority.
func (m *Member) run(rev int64) {
	defer close(m.loopDone)
	defer m.w.Close()
	backoff := coord.Backoff{Base: 50 * time.Millisecond, Cap: time.Second}
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	attempt := 0
	wch := m.g.cli.Watch(m.ctx, m.g.keys.target, clientv3.WithRev(rev+1))
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.s.Done():
			m.log.Warn("ownership: session lost; every partition is revoked", "err", m.s.Err())
			m.stop()
			return
		case v, ok := <-m.w.Updates():
			if !ok {
				return
			}
			ids := make([]string, 0, len(v.Members))
			for _, mb := range v.Members {
				ids = append(ids, mb.Instance)
			}
			m.mu.Lock()
			m.members = ids
			m.mu.Unlock()
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil {
				// Compacted or the stream ended: read the target and watch on.
				r, err := m.readTarget()
				if err != nil {
					m.log.Warn("ownership: target read failed; retrying", "err", err)
					_ = backoff.Wait(m.ctx, coord.SystemClock(), attempt)
					attempt++
					if m.ctx.Err() == nil {
						wch = m.g.cli.Watch(m.ctx, m.g.keys.target, clientv3.WithRev(rev+1))
					}
					continue
				}
				attempt, rev = 0, r
				wch = m.g.cli.Watch(m.ctx, m.g.keys.target, clientv3.WithRev(rev+1))
				break
			}
			for _, ev := range wr.Events {
				m.seeTarget(ev.Kv.Value, ev.Kv.ModRevision, ev.Type == clientv3.EventTypeDelete)
			}
			rev = wr.Header.Revision
		case <-retry.C:
		}
		if !m.evaluate() {
			retry.Reset(backoff.Delay(attempt))
			attempt++
		} else {
			attempt = 0
		}
	}
}

// readTarget reads the target key (linearizable) and applies it; it returns
// the read's revision.
func (m *Member) readTarget() (int64, error) {
	ctx, cancel := context.WithTimeout(m.ctx, m.s.TTL()/3)
	defer cancel()
	resp, err := m.g.cli.Get(ctx, m.g.keys.target)
	if err != nil {
		return 0, etcderr.Classify(err)
	}
	if len(resp.Kvs) == 0 {
		m.seeTarget(nil, 0, true)
	} else {
		m.seeTarget(resp.Kvs[0].Value, resp.Kvs[0].ModRevision, false)
	}
	return resp.Header.Revision, nil
}

// seeTarget records a target read from etcd, unless an equal or newer one is
// known already (our own write's watch event comes after its response).
func (m *Member) seeTarget(value []byte, modRev int64, deleted bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !deleted && modRev <= m.target.Revision {
		return
	}
	switch t, err := decodeTarget(value, modRev); {
	case deleted:
		m.target = target{}
	case err != nil:
		m.log.Warn("ownership: malformed target; it will be rewritten", "err", err)
		m.target = target{Revision: modRev}
	default:
		m.target = t
	}
	m.reconcileLocked()
}

// evaluate reconciles the partitions with the target and, when the target
// computed from the current view differs, writes it. It reports false when a
// write failed and should be retried.
func (m *Member) evaluate() bool {
	for range 5 {
		m.mu.Lock()
		m.reconcileLocked()
		prev, members := m.target, m.members
		skip := m.stopped || m.leaving || members == nil || m.s.Err() != nil
		m.mu.Unlock()
		if skip {
			return true
		}
		if prev.Partitions != 0 && prev.Partitions != m.g.cfg.Partitions {
			m.log.Error("ownership: the group's target has another partition count; not rewriting it",
				"target_partitions", prev.Partitions, "partitions", m.g.cfg.Partitions)
			return true
		}
		owners := prev.Owners
		if owners == nil {
			owners = make([]string, m.g.cfg.Partitions)
		}
		next := assign(owners, members)
		if slices.Equal(next, prev.Owners) {
			return true
		}
		ctx, cancel := context.WithTimeout(m.ctx, m.s.TTL()/3)
		done, err := m.writeTarget(ctx, prev, next)
		cancel()
		if err != nil {
			if m.ctx.Err() == nil {
				m.log.Warn("ownership: target write failed; retrying", "err", err)
			}
			return false
		}
		if done {
			return true
		}
		// Someone else wrote first: seeTarget took theirs; recompute.
	}
	return true
}

// writeTarget writes next if the target key is still at prev's revision. It
// reports whether it wrote; on a lost race it applies the winner's target.
func (m *Member) writeTarget(ctx context.Context, prev target, next []string) (bool, error) {
	b, err := encodeTarget(next)
	if err != nil {
		return false, err
	}
	resp, err := m.g.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(m.g.keys.target), "=", prev.Revision)).
		Then(clientv3.OpPut(m.g.keys.target, string(b))).
		Else(clientv3.OpGet(m.g.keys.target)).Commit()
	if err != nil {
		return false, etcderr.Classify(err)
	}
	if !resp.Succeeded {
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
			m.seeTarget(kvs[0].Value, kvs[0].ModRevision, false)
		} else {
			m.seeTarget(nil, 0, true)
		}
		return false, nil
	}
	m.in.wroteTarget()
	moved := len(next)
	if prev.Owners != nil {
		moved = moves(prev.Owners, next)
	}
	m.log.Info("ownership: target written", "revision", resp.Header.Revision, "moves", moved)
	m.seeTarget(b, resp.Header.Revision, false)
	return true, nil
}
