package reliability

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// PartitionInput is an operation on one partition's fenced register: each
// partition of an ownership group is its own register (its own counter and its
// own fence row), so a history is linearizable iff each partition's is.
type PartitionInput struct {
	Partition int
	RegisterInput
}

// PartitionedRegister is the porcupine model of many independent fenced
// registers, one per partition: FencedRegister's rules, checked partition by
// partition (Partition splits the history), which keeps the check linear in the
// number of partitions.
var PartitionedRegister = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[int][]porcupine.Operation{}
		var order []int
		for _, op := range history {
			p := op.Input.(PartitionInput).Partition
			if _, seen := by[p]; !seen {
				order = append(order, p)
			}
			by[p] = append(by[p], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, p := range order {
			out = append(out, by[p])
		}
		return out
	},
	Init: FencedRegister.Init,
	Step: func(s, in, out any) (bool, any) {
		return FencedRegister.Step(s, in.(PartitionInput).RegisterInput, out)
	},
	DescribeOperation: func(in, out any) string {
		i := in.(PartitionInput)
		return fmt.Sprintf("p%d: %s", i.Partition, FencedRegister.DescribeOperation(i.RegisterInput, out))
	},
}
