package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// How a relay claims a batch. Every batch takes the relay lease first, a
// transaction-scoped advisory lock of the table's relays, in the round trip that
// begins it:
//
//   - solo: the lease exclusively. No other relay's batch is in flight, so none
//     holds a key: one statement reads the batch — the pending rows in seq order,
//     past the keys that are parked or wait for a retry — with no key locks. A
//     relay works solo while it is alone: each relay holds a presence lock
//     (shared, session-level, on its LISTEN connection) and counts the holders
//     once a second (lookAround).
//   - keyed: the lease shared, beside the other relays' keyed batches; each key
//     is then driven by one relay at a time through its key lock (lockKeys, then
//     the claim; see buildStatements). Relays work keyed while others are
//     present, so that their batches publish in parallel; a relay that tried
//     solo and found the lease held also works keyed, for soloPause.
//
// The mode is only a choice of the faster claim: whichever a relay picks, the
// lease keeps a solo batch apart from every other batch.
//
// The lease is what makes the solo claim safe: a solo batch and any other batch
// exclude each other for their whole transaction (claim, publish, mark), and
// whatever a previous batch committed — marks, failures, parkings — is in the
// solo claim's snapshot, taken after the lease. The operator's verbs on parked
// events (ParkedRequeue, ParkedDiscard, ParkedLockTx and their bulk forms) take
// only key locks: a solo claim never reads a parked key, and a requeued or
// discarded key is read whole, from its head, by the first claim whose snapshot
// has it.
const soloPause = 10 * time.Second

// Short retries: a batch that claimed nothing while other relays held the lease
// or every key it met tries again after shortRetry, doubling each time up to
// shortRetryMax (or PollInterval, if shorter), instead of waiting for the next
// NOTIFY or poll: no NOTIFY comes for events that are already there, only held.
const (
	shortRetry    = 2 * time.Millisecond
	shortRetryMax = 128 * time.Millisecond
)

// The lease values the first statement of a batch sets (coordkit.outbox_lease).
const (
	leaseSolo  = "solo"
	leaseKeyed = "keyed"
)

// relayBuckets is how many buckets keyed relays share the keys in (a power of
// two: a key's bucket is hashtext(key) & (relayBuckets - 1)). A keyed batch
// chooses its buckets among those of the first BatchSize pending rows, or
// bucketWindowRows if more, so that a relay finds free buckets past the ones
// other relays hold.
const (
	relayBuckets     = 64
	bucketWindowRows = 8 * relayBuckets
)

// claim begins a transaction on conn, takes the relay lease and claims up to
// BatchSize rows — per key a prefix in seq order that stops before a row not yet
// due — in one round trip. contended reports that the batch claimed nothing
// because other relays held the lease or every bucket it reached.
func (r *Relay) claim(ctx context.Context, conn *pgx.Conn) (msgs []Message, contended bool, err error) {
	b := &pgx.Batch{}
	c := r.queueClaim(b)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, false, fmt.Errorf("claim: %w", err)
	}
	msgs, contended = r.finishClaim(c)
	return msgs, contended, nil
}

// claimQuery is a claim queued in a batch (BEGIN, the lease, the claim): the
// batch's callbacks fill it in as its results are read.
type claimQuery struct {
	solo            bool
	lease           string
	locked, reached int64
	msgs            []Message
}

// queueClaim queues a claim at the end of b, in the mode the relay is in.
func (r *Relay) queueClaim(b *pgx.Batch) *claimQuery {
	c := &claimQuery{solo: r.solo()}
	b.Queue("BEGIN")
	if c.solo {
		b.Queue(r.o.sql.soloLease, r.o.leaseClass, r.o.table).QueryRow(func(row pgx.Row) error {
			var plans, commits bool
			return row.Scan(&c.lease, &plans, &commits)
		})
		b.Queue(r.o.sql.soloClaim, r.cfg.BatchSize).Query(func(rows pgx.Rows) (err error) {
			c.msgs, err = r.scanClaim(rows)
			return err
		})
		return c
	}
	// Our share of the buckets: all of them divided among the relays present.
	share := (relayBuckets + r.others) / (r.others + 1)
	b.Queue(r.o.sql.keyedLease, r.o.leaseClass, r.o.table, r.o.bucketClass, relayBuckets, max(r.cfg.BatchSize, bucketWindowRows), share).QueryRow(func(row pgx.Row) error {
		var plans, commits, handed bool
		return row.Scan(&c.lease, &plans, &commits, &handed, &c.locked, &c.reached)
	})
	b.Queue(r.o.sql.claim, r.cfg.BatchSize, relayBuckets).Query(func(rows pgx.Rows) (err error) {
		c.msgs, err = r.scanClaim(rows)
		return err
	})
	return c
}

// finishClaim reads what a sent claim found: its rows, and when none, whether
// other relays held the lease or the buckets (contended). A solo claim that found
// the lease held turns the relay keyed for soloPause.
func (r *Relay) finishClaim(c *claimQuery) (msgs []Message, contended bool) {
	switch {
	case c.lease == "" && c.solo:
		// Another relay's batch holds the lease: work keyed for a while.
		r.keyedUntil = time.Now().Add(r.soloPause)
		return nil, true
	case c.lease == "":
		return nil, true // a solo batch holds it
	}
	if c.solo && len(c.msgs) > 0 {
		r.stats.solo.Add(1)
	}
	return c.msgs, !c.solo && len(c.msgs) == 0 && c.locked == 0 && c.reached > 0
}

// solo reports whether the next batch tries the lease exclusively.
func (r *Relay) solo() bool {
	switch r.mode {
	case modeSolo:
		return true
	case modeKeyed:
		return false
	}
	return r.others == 0 && !time.Now().Before(r.keyedUntil)
}

// Relay modes (tests force one; relays choose).
const (
	modeAuto = iota
	modeSolo
	modeKeyed
)

// scanClaim reads a claim's rows: per key, the rows up to the first one not yet
// due, at most BatchSize in all (a cut tail keeps every key's rows a prefix).
func (r *Relay) scanClaim(rows pgx.Rows) ([]Message, error) {
	var msgs []Message
	stopped := map[string]bool{}
	for rows.Next() {
		var m Message
		var id pgtype.UUID
		var payload, headers string
		var due bool
		if err := rows.Scan(&m.Seq, &id, &m.Topic, &m.Key, &m.Type, &payload, &headers, &m.CreatedAt, &m.Attempt, &due); err != nil {
			return nil, err
		}
		if len(msgs) >= r.cfg.BatchSize {
			break // rows committed since the locking scan; cutting the tail keeps per-key prefixes
		}
		if stopped[m.Key] || !due {
			stopped[m.Key] = true
			continue
		}
		m.ID = ID(id.Bytes)
		m.Payload = []byte(payload)
		if headers != "{}" {
			if err := json.Unmarshal([]byte(headers), &m.Headers); err != nil {
				return nil, fmt.Errorf("headers of %s: %w", m.ID, err)
			}
		}
		m.Attempt++
		msgs = append(msgs, m)
	}
	return msgs, rows.Err()
}
