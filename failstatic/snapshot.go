package failstatic

import "time"

// Source says where the served snapshot came from.
type Source uint8

const (
	// SourceLive: read from etcd by this process.
	SourceLive Source = iota + 1
	// SourceDisk: loaded from the state file at start, because etcd did not
	// answer in time; replaced by a live snapshot as soon as etcd answers.
	SourceDisk
)

// String returns "live", "disk" or "unknown".
func (s Source) String() string {
	switch s {
	case SourceLive:
		return "live"
	case SourceDisk:
		return "disk"
	}
	return "unknown"
}

// KV is one key of a snapshot, as handed to Config.Decode (sorted by key).
type KV struct {
	Key         string
	Value       []byte // shared: Decode must not modify it
	ModRevision int64
}

// Change is one key's difference between two adopted snapshots, delivered to
// subscribers in revision order.
type Change struct {
	Key         string
	Value       []byte // nil when Deleted
	ModRevision int64  // revision of the put; for a delete, the revision it was observed at
	Deleted     bool
}

// UnknownStaleness is the least staleness of a snapshot whose last confirmation
// cannot be trusted: one started from a state file whose confirmation time lies in
// the future (the wall clock went back across a restart) or is unset. It exceeds
// every sensible MaxStaleness, so every key class fails closed until etcd confirms
// the cache; Staleness and the staleness metric report it (about 146 years).
const UnknownStaleness = time.Duration(1 << 62)

// Snapshot is what Get returns: the decoded value with its provenance.
type Snapshot[T any] struct {
	Value     T
	Revision  int64         // etcd revision the snapshot reflects
	Source    Source        // live or disk
	Staleness time.Duration // time since the cache was last confirmed current; ≥ UnknownStaleness when unknown
}

// state is one adopted snapshot; immutable once published.
type state[T any] struct {
	value  T
	rev    int64
	source Source
	kvs    map[string]KV
	maxMod int64 // highest ModRevision among kvs
}
