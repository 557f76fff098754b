package idempotency

import "sync/atomic"

// plan chooses Do's first round trip from what the Store's recent requests found.
// Claiming first (BEGIN, lock and read in one round trip) costs a new key three
// round trips in all — the bare effect transaction's count — and a replay two (the
// read, then ROLLBACK). Looking up first (a read without a transaction) costs a
// replay one and a new key four. So Do looks up first only while more than half of
// its recent requests found their key, as in a retry storm. The outcome of a
// request never depends on the plan, only its round trips do.
type plan struct {
	found atomic.Int64 // share of recent requests that found their key, × planOne
}

const (
	planOne   = 1 << 16
	planDecay = 16 // each request moves the share 1/planDecay of the way to its outcome
)

func (p *plan) lookupFirst() bool { return p.found.Load() > planOne/2 }

// observe records whether a request found its key.
func (p *plan) observe(found bool) {
	target := int64(0)
	if found {
		target = planOne
	}
	for {
		old := p.found.Load()
		if p.found.CompareAndSwap(old, old+(target-old)/planDecay) {
			return
		}
	}
}
