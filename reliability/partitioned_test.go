package reliability

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The per-partition checker must be able to fail, and must not mix partitions:
// hand-made histories.
func TestPartitionedRegisterModel(t *testing.T) {
	incr := func(p int, tok int64, id string) PartitionInput {
		return PartitionInput{Partition: p, RegisterInput: RegisterInput{Kind: OpIncr, Token: tok, ID: id}}
	}
	ok := func(v int64) RegisterOutput { return RegisterOutput{Accepted: true, Value: v} }
	rej := RegisterOutput{}
	op := func(client int, in PartitionInput, out RegisterOutput, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
	}
	cases := []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"each partition its own counter and fence", []porcupine.Operation{
			op(0, incr(1, 5, "a"), ok(1), 0, 1),
			op(1, incr(2, 3, "b"), ok(1), 2, 3), // an older token on another partition is fine
			op(0, incr(1, 7, "c"), ok(2), 4, 5),
			op(1, incr(1, 5, "d"), rej, 6, 7),
		}, porcupine.Ok},
		{"stale write accepted on one partition", []porcupine.Operation{
			op(0, incr(1, 7, "a"), ok(1), 0, 1),
			op(1, incr(2, 3, "b"), ok(1), 2, 3),
			op(2, incr(1, 5, "c"), ok(2), 4, 5),
		}, porcupine.Illegal},
		{"a rejection justified only by another partition's token", []porcupine.Operation{
			op(0, incr(2, 9, "a"), ok(1), 0, 1),
			op(1, incr(1, 5, "b"), rej, 2, 3),
		}, porcupine.Illegal},
		{"lost write", []porcupine.Operation{
			op(0, incr(1, 5, "a"), ok(1), 0, 1),
			op(0, incr(1, 5, "b"), ok(1), 2, 3),
		}, porcupine.Illegal},
	}
	for _, c := range cases {
		if got := porcupine.CheckOperationsTimeout(PartitionedRegister, c.ops, 10*time.Second); got != c.want {
			t.Errorf("%s: check = %v, want %v", c.name, got, c.want)
		}
	}
}
