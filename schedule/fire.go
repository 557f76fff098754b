package schedule

import (
	"fmt"
	"time"

	"github.com/coordkit/coordkit/coord"
)

// LocalLayout formats a fire's local wall-clock time (microseconds, the
// precision PostgreSQL keeps).
const LocalLayout = "2006-01-02T15:04:05.999999"

// ID is a fire's identity: a job's scheduled wall-clock time in its zone and
// which reading of that time it is. Two fires with one ID are one fire: the
// fires table is unique on it, so a retry, a late scheduler or a second
// backfill of the same time cannot run its effect twice.
type ID struct {
	Tenant string
	Job    string
	// Local is the wall-clock reading in the job's zone (a civil time: its
	// fields are the reading, its Location is time.UTC by convention). In a
	// spring gap it names no instant: the fire then ran at the gap's end.
	Local time.Time
	// Fold is 0, or 1 for the second reading of Local in an autumn fold
	// (FoldLast, FoldTwice; an interval job's fire in the repeated hour).
	Fold int
}

// String returns "tenant/job@2026-11-01T01:30:00" (with "+fold1" in a fold's
// second reading).
func (id ID) String() string {
	s := id.Tenant + "/" + id.Job + "@" + id.Local.Format(LocalLayout)
	if id.Fold != 0 {
		s += fmt.Sprintf("+fold%d", id.Fold)
	}
	return s
}

// Key returns the fire's idempotency key, "schedule/" + String(): pass it to
// every effect outside the fire's transaction (outbox, idempotency, a
// payment provider's Idempotency-Key header) so that its receiver
// deduplicates a retried or late fire.
func (id ID) Key() string { return "schedule/" + id.String() }

// Fire is one run of a job (or one batch of a multi-batch run) as its
// Handler sees it.
type Fire struct {
	ID
	// Nominal is the instant the fire was due (UTC): the wall-clock time's
	// instant, the end of the gap for a time the clocks skipped, the request's
	// time for a manual fire.
	Nominal time.Time
	// Kind says why it runs: its time came, an operator's Trigger or Backfill.
	Kind Kind
	// Token is the fencing token of the job's ownership partition; the fire's
	// transaction is fenced with it already. Send it along with any write the
	// fire makes elsewhere on its authority.
	Token coord.Token
	// Attempt counts the Handler calls for this fire (or batch), from 1.
	Attempt int
	// Batch numbers the batches of a multi-batch run, from 0.
	Batch int
	// Cursor is what the previous batch passed to Continue; nil in batch 0.
	Cursor []byte

	next []byte
	more bool
}

// Continue asks for another batch of this fire after the current one
// commits, with cursor as the next batch's Cursor: a long run (a monthly
// billing run over every customer) commits batch by batch, each fenced, and a
// scheduler that takes the job over resumes the run at the last committed
// cursor. The fire's record says "running" until a batch returns without
// calling Continue. It does not block.
func (f *Fire) Continue(cursor []byte) {
	f.next, f.more = cursor, true
}
