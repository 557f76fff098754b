package reliability

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// A fenced register: a counter guarded by fencing tokens. A write (increment)
// presenting a token older than the highest accepted one must be rejected; an
// accepted increment moves the counter by exactly one. Reads return the counter.

// OpKind is the kind of an operation on the fenced register.
type OpKind int

// The operations of the fenced register.
const (
	OpIncr OpKind = iota // fenced increment
	OpRead               // read the counter
)

// RegisterInput is what a client asked.
type RegisterInput struct {
	Kind  OpKind
	Token int64  // the fencing token's revision, for OpIncr
	ID    string // the increment's idempotency key, for OpIncr
	// Zombie marks an increment sent after its holder lost the lease (the model
	// treats it like any other; failover timing leaves it out).
	Zombie bool
}

// RegisterOutput is what the resource answered (after ambiguous outcomes were
// resolved through the idempotency keys).
type RegisterOutput struct {
	Accepted bool  // OpIncr: applied; false: rejected as stale
	Value    int64 // OpIncr: the counter after it, when accepted; OpRead: the counter
}

type registerState struct {
	fence int64
	value int64
}

// FencedRegister is the porcupine model of the fenced register.
var FencedRegister = porcupine.Model{
	Init: func() any { return registerState{} },
	Step: func(s, in, out any) (bool, any) {
		st, i, o := s.(registerState), in.(RegisterInput), out.(RegisterOutput)
		switch i.Kind {
		case OpRead:
			return o.Value == st.value, st
		default:
			if !o.Accepted {
				// A rejection is linearizable only if a newer token was already seen.
				return i.Token < st.fence, st
			}
			if i.Token < st.fence || o.Value != st.value+1 {
				return false, st
			}
			return true, registerState{fence: i.Token, value: st.value + 1}
		}
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(RegisterInput), out.(RegisterOutput)
		if i.Kind == OpRead {
			return fmt.Sprintf("read() -> %d", o.Value)
		}
		return fmt.Sprintf("incr(tok=%d, %s) -> accepted=%v value=%d", i.Token, i.ID, o.Accepted, o.Value)
	},
}

// History records operations from many goroutines with monotonic timestamps.
type History struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

// NewHistory starts an empty history.
func NewHistory() *History { return &History{start: time.Now()} }

// Since returns the monotonic timestamp used for Call and Return.
func (h *History) Since() int64 { return int64(time.Since(h.start)) }

// Add records one completed operation.
func (h *History) Add(client int, in RegisterInput, out RegisterOutput, call, ret int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
}

// Len returns the number of operations recorded.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Check verifies linearizability against FencedRegister within timeout.
func (h *History) Check(timeout time.Duration) porcupine.CheckResult {
	h.mu.Lock()
	ops := append([]porcupine.Operation(nil), h.ops...)
	h.mu.Unlock()
	return porcupine.CheckOperationsTimeout(FencedRegister, ops, timeout)
}

// TokenRegressions counts accepted increments, in the order the resource applied
// them (by resulting value), whose token is lower than an earlier accepted one.
func (h *History) TokenRegressions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	var acc []porcupine.Operation
	for _, op := range h.ops {
		if op.Input.(RegisterInput).Kind == OpIncr && op.Output.(RegisterOutput).Accepted {
			acc = append(acc, op)
		}
	}
	sort.Slice(acc, func(i, j int) bool {
		return acc[i].Output.(RegisterOutput).Value < acc[j].Output.(RegisterOutput).Value
	})
	var regressions int
	var highest int64
	for _, op := range acc {
		tok := op.Input.(RegisterInput).Token
		if tok < highest {
			regressions++
		}
		highest = max(highest, tok)
	}
	return regressions
}
