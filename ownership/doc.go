// Package ownership assigns the P partitions of a group to its live members
// through etcd and fences every write of every partition at the resource:
// coordinate ownership, not operations.
//
// Each member joins on one correctnesslease.Session ([Group.Join]): its member
// key (package membership's format, so a membership.Watcher sees the group) and
// every partition it holds are keys on that session's single etcd lease, kept
// alive by one keepalive per TTL/3. Partition p is the correctness lease
// [LeaseName](group, p), acquired on the session (queued behind the previous
// owner's key), so its [Partition.Token] is
// minted by correctnesslease and pgfence takes it as is (one fence row per
// partition), and its [Partition.Context] is cancelled at step-down (2/3 TTL of
// failed renewal), before etcd can let anyone else acquire it.
//
// The assignment is a target stored at /tenants/{t}/ownership/{group}/target: a
// pure "sticky balanced" function of the previous target and the member set
// (see docs/ownership.md), written by any member under a compare on the previous
// target's revision. Every member computes the same target, so races are
// harmless, and a settled group writes nothing. From a balanced target a join
// moves only what the joiner takes and a leave only the leaver's partitions: at
// most ⌈P/N⌉+1.
//
// A planned move (join, leave, rebalance) revokes the partition on its owner:
// its context is cancelled with a [*RevokedError], then the key is released at
// [Partition.Done] or after Config.DrainTimeout, and the new owner, queued behind
// that key, holds it at once. An unplanned loss (owner paused, crashed or cut
// off) ends when the owner's session lease expires; its late writes carry an old
// token and the resource rejects them. Only moving partitions pause.
//
// [Snapshot] and [Observe] show the map (partition → owner, target, token
// revision) to outsiders.
package ownership
