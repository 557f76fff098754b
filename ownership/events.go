package ownership

// EventKind says what happened to a partition of this member.
type EventKind int

// The kinds of Event.
const (
	// Acquired: the member holds the partition; its Context is live.
	Acquired EventKind = iota + 1
	// Revoked: the partition's Context was cancelled. After a planned revoke
	// (ReasonRebalance, ReasonLeave) the key is still held until Done or the
	// DrainTimeout; after a loss it may already be someone else's.
	Revoked
)

// String returns "acquired" or "revoked".
func (k EventKind) String() string {
	switch k {
	case Acquired:
		return "acquired"
	case Revoked:
		return "revoked"
	}
	return "unknown"
}

// Reason says why a partition was acquired or revoked. It is also the
// coordkit.reason attribute of coordkit.ownership.moves.
type Reason string

// Reasons of events.
const (
	ReasonAssigned    Reason = "assigned"     // Acquired: the target gives it to this member
	ReasonRebalance   Reason = "rebalance"    // Revoked (planned): the target moved it to another member
	ReasonLeave       Reason = "leave"        // Revoked (planned): Leave hands it off
	ReasonClosed      Reason = "closed"       // Revoked: Close released it without a handoff
	ReasonSessionLost Reason = "session_lost" // Revoked: the session stepped down or expired
	ReasonKeyLost     Reason = "key_lost"     // Revoked: the partition's key was deleted or overwritten by someone else
)

// Event is one acquisition or revocation. Partition is the same value Owned
// returned while it was held.
type Event struct {
	Kind      EventKind
	Partition *Partition
	Reason    Reason
}
