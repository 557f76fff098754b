package outbox

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/pgtext"
	"github.com/coordkit/coordkit/internal/pgtx"
)

// Relay publishes the outbox. Several relays (in one or many processes) may run
// against one table: each key is driven by at most one relay at a time, so a
// later event of a key is never published before an earlier one, while different
// keys flow in parallel. Publication is at-least-once.
type Relay struct {
	o     *Outbox
	db    *pgxpool.Pool
	pub   Publisher
	cfg   Config
	stats relayStats
	// Read and written by Run's goroutine only (see claim.go).
	mode       int       // modeAuto, or a mode a test forces
	others     int       // other relays present at the last look around
	keyedUntil time.Time // modeAuto: work keyed until then
	soloPause  time.Duration
}

type relayStats struct {
	batches, solo, published, failures, parked, dbErrors, wakeups atomic.Int64
}

// RelayStats counts what a relay did since it was created.
type RelayStats struct {
	Batches   int64 // transactions that claimed at least one event
	Solo      int64 // of the Batches, those claimed holding the relay lease alone (no other relay's batch in flight)
	Published int64 // events published and marked (or deleted)
	Failures  int64 // failed publish attempts (retried or parked)
	Parked    int64 // events moved to the dead-letter table
	DBErrors  int64 // batches aborted by a database error (retried with backoff)
	Wakeups   int64 // NOTIFY wakeups received
}

// NewRelay returns a relay that publishes o's table through pub, using db for
// claims, marks and LISTEN (one pooled connection is held while Run runs).
func (o *Outbox) NewRelay(db *pgxpool.Pool, pub Publisher) (*Relay, error) {
	if db == nil || pub == nil {
		return nil, &ConfigError{Field: "NewRelay", Reason: "db and publisher are required"}
	}
	return &Relay{o: o, db: db, pub: pub, cfg: o.cfg, soloPause: soloPause}, nil
}

// Stats returns the relay's counters.
func (r *Relay) Stats() RelayStats {
	return RelayStats{
		Batches: r.stats.batches.Load(), Solo: r.stats.solo.Load(), Published: r.stats.published.Load(), Failures: r.stats.failures.Load(),
		Parked: r.stats.parked.Load(), DBErrors: r.stats.dbErrors.Load(), Wakeups: r.stats.wakeups.Load(),
	}
}

// Run publishes until ctx is done. It wakes on NOTIFY from EnqueueTx and polls
// every Config.PollInterval as a fallback; database and broker failures are
// retried with backoff forever (a PostgreSQL restart is survived without help).
// When ctx is cancelled, the batch in flight is finished (published and marked)
// within Config.ShutdownTimeout and Run returns nil; anything not marked stays in
// the table for the next relay, so shutdown loses nothing. If the publisher is a
// Checker, Run first checks it: a missing destination (ErrNoDestination) is
// returned at once, naming the stream or topic.
func (r *Relay) Run(ctx context.Context) error {
	if c, ok := r.pub.(Checker); ok {
		if err := c.Check(ctx); errors.Is(err, ErrNoDestination) {
			return fmt.Errorf("outbox: relay for %s: %w", r.cfg.Table, err)
		} else if err != nil && ctx.Err() == nil {
			r.cfg.Logger.WarnContext(ctx, "outbox relay: publisher check failed; starting anyway", "table", r.cfg.Table, "err", err)
		}
	}
	wake := make(chan struct{}, 1)
	lctx, stopListen := context.WithCancel(ctx)
	listenDone := make(chan struct{})
	go func() {
		defer close(listenDone)
		r.listen(lctx, wake)
	}()
	pruneDone := make(chan struct{})
	go func() {
		defer close(pruneDone)
		if !r.cfg.DeleteOnPublish {
			r.pruneLoop(lctx)
		}
	}()
	defer func() {
		stopListen()
		<-listenDone
		<-pruneDone
	}()

	clock := coord.SystemClock()
	var nextGauge time.Time
	errStreak := 0
	retry := time.Duration(0) // the next short retry; 0: none pending
	var carry *carried        // the next batch's claim, when it rode with a COMMIT
	defer func() {
		if carry != nil {
			carry.drop(ctx) // claimed, not published: the rows stay pending
		}
	}()
	for ctx.Err() == nil {
		out, err := r.batch(ctx, carry)
		carry = out.next
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.stats.dbErrors.Add(1)
			r.cfg.Logger.WarnContext(ctx, "outbox relay: batch failed, retrying", "table", r.cfg.Table, "err", err, "streak", errStreak)
			if r.cfg.Backoff.Wait(ctx, clock, errStreak) != nil {
				return nil
			}
			errStreak++
			continue
		}
		errStreak = 0
		now := time.Now()
		if now.After(nextGauge) {
			r.lookAround(ctx, carry != nil)
			nextGauge = now.Add(time.Second)
		}
		if !out.idle {
			retry = 0
			continue // more may be waiting (a partial batch can mean other relays hold keys)
		}
		wait := r.cfg.PollInterval
		if out.contended {
			// Other relays hold what is there: try again soon, backing off.
			retry = min(max(2*retry, shortRetry), shortRetryMax, r.cfg.PollInterval)
			wait = retry
		} else {
			retry = 0
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
	return nil
}

// pruneLoop prunes every PruneInterval, beside the publishing loop (so a long
// prune never delays publication), until ctx is done.
func (r *Relay) pruneLoop(ctx context.Context) {
	t := time.NewTicker(r.cfg.PruneInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := r.o.Prune(ctx, r.db); err != nil && ctx.Err() == nil {
			r.cfg.Logger.WarnContext(ctx, "outbox relay: prune failed", "table", r.cfg.Table, "err", err)
		}
	}
}

// lookAround reads the oldest pending age for its gauge, and how many relays
// are present (see claim.go), on a connection of the pool. While a claim is
// carried to the next batch, it skips the look when every connection of the
// pool is taken: one of them is the carried claim's, and on a small pool waiting
// for another could wait forever.
func (r *Relay) lookAround(ctx context.Context, carrying bool) {
	if st := r.db.Stat(); carrying && st.IdleConns() == 0 && st.TotalConns() >= st.MaxConns() {
		return
	}
	var age float64
	var present int
	if err := r.db.QueryRow(ctx, r.o.sql.relayGauge, r.o.presence, r.o.table).Scan(&age, &present); err == nil {
		r.o.m.oldest.Store(math.Float64bits(age))
		r.others = max(present-1, 0)
	}
}

// carried is a claim that rode with the previous batch's COMMIT: its
// connection, in the transaction that holds the claim, and the rows.
type carried struct {
	pc   *pgxpool.Conn
	msgs []Message
}

// drop rolls the carried transaction back and returns its connection.
func (c *carried) drop(ctx context.Context) {
	pgtx.RollbackConn(ctx, c.pc.Conn())
	c.pc.Release()
}

// batchOutcome is what a batch did: n rows claimed (and published, marked); the
// next batch's claim when it rode with this batch's COMMIT and found rows; idle
// when that claim found nothing (or this batch claimed nothing), and then
// contended when other relays held the lease or the buckets.
type batchOutcome struct {
	n         int
	next      *carried
	idle      bool
	contended bool
}

// batch claims (or takes over the claim carried from the previous batch),
// publishes and marks one batch. Once rows are claimed it finishes even if ctx is
// cancelled (bounded by ShutdownTimeout after the cancellation). While ctx is
// live, the next batch's claim rides with this batch's COMMIT, so that a relay
// with work makes one round trip per batch.
func (r *Relay) batch(ctx context.Context, carry *carried) (out batchOutcome, err error) {
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	// After ctx is cancelled, the batch may take ShutdownTimeout more to finish.
	stop := context.AfterFunc(ctx, func() {
		t := time.NewTimer(r.cfg.ShutdownTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-bctx.Done():
		}
	})
	defer stop()

	// One connection, an explicit transaction driven in two round trips: BEGIN +
	// lease + claim, mark + COMMIT (plus one to record failures, if any) — the
	// first of them the previous batch's last, when the claim rode with its
	// COMMIT. On any error the transaction is rolled back (or the connection
	// dropped by the pool, which discards a connection that is still in a
	// transaction), which releases the lease and the bucket locks.
	var pc *pgxpool.Conn
	var msgs []Message
	if carry != nil {
		pc, msgs = carry.pc, carry.msgs
	} else if pc, err = r.db.Acquire(ctx); err != nil {
		return batchOutcome{}, fmt.Errorf("acquire: %w", err)
	}
	conn := pc.Conn()
	handed := false // the connection went on with the next batch's claim
	defer func() {
		if !handed {
			pgtx.RollbackConn(ctx, conn)
			pc.Release()
		}
	}()
	if carry == nil {
		var contended bool
		if msgs, contended, err = r.claim(ctx, conn); err != nil || len(msgs) == 0 {
			return batchOutcome{idle: true, contended: contended}, err
		}
	}
	r.stats.batches.Add(1)

	pctx, pcancel := context.WithTimeout(bctx, r.cfg.PublishTimeout)
	errs := r.pub.Publish(pctx, msgs)
	pcancel()
	if errs != nil && len(errs) != len(msgs) {
		errs = make([]error, len(msgs))
		for i := range errs {
			errs[i] = errors.New("outbox: publisher returned a malformed error slice")
		}
	}

	ok, failures := r.sortOutcomes(ctx, msgs, errs)
	lags, fellBack, nc, err := r.record(bctx, conn, ok, failures, ctx.Err() == nil)
	if err != nil {
		return batchOutcome{}, err
	}
	r.stats.published.Add(int64(len(ok)))
	r.observe(bctx, msgs, lags, failures, fellBack)
	out = batchOutcome{n: len(msgs)}
	if nc != nil {
		next, contended := r.finishClaim(nc)
		if len(next) > 0 {
			handed = true
			out.next = &carried{pc: pc, msgs: next}
		} else {
			out.idle, out.contended = true, contended
		}
	}
	return out, nil
}

// maxErrorBytes bounds the publisher error text stored in last_error.
const maxErrorBytes = 2000

// observe counts a committed batch in the metrics, per topic (coordkit.outbox.topic).
func (r *Relay) observe(ctx context.Context, msgs []Message, lags []seqLag, failures []failure, fellBack bool) {
	topic := make(map[int64]string, len(msgs))
	for _, m := range msgs {
		topic[m.Seq] = m.Topic
	}
	attrs := map[string]metric.MeasurementOption{}
	at := func(t string) metric.MeasurementOption {
		o, ok := attrs[t]
		if !ok {
			o = metric.WithAttributes(attribute.String(attrTopic, t))
			attrs[t] = o
		}
		return o
	}
	published := map[string]int64{}
	for _, l := range lags {
		t := topic[l.seq]
		r.o.m.lag.Record(ctx, l.ms/1000, at(t)) // seconds
		published[t]++
	}
	for t, n := range published {
		r.o.m.published.Add(ctx, n, at(t))
	}
	for _, f := range failures {
		if f.park && !fellBack {
			r.stats.parked.Add(1)
			r.o.m.parked.Add(ctx, 1, at(topic[f.seq]))
		} else {
			r.o.m.retries.Add(ctx, 1, at(topic[f.seq]))
		}
	}
}

// seqLag is a marked row's publish lag, in milliseconds.
type seqLag struct {
	seq int64
	ms  float64
}

// failure is a failed publish attempt to record: a retry, or parking.
type failure struct {
	seq     int64
	delay   time.Duration
	park    bool
	errText string // storable (pgtext.Clean)
}

// sortOutcomes splits a batch's publish results into the seqs to mark and the
// failures to record (at most one per key: its first failed message).
func (r *Relay) sortOutcomes(ctx context.Context, msgs []Message, errs []error) (ok []int64, failures []failure) {
	failed := map[string]bool{}
	for i, m := range msgs {
		var perr error
		if errs != nil {
			perr = errs[i]
		}
		if failed[m.Key] && perr == nil {
			// A publisher broke the contract (a later message of a failed key was
			// published). Do not mark it: it will be published again, after its
			// predecessor; the duplicate is for the inbox to drop.
			r.cfg.Logger.ErrorContext(ctx, "outbox relay: publisher published past a failure of the same key", "key", m.Key, "id", m.ID.String())
			continue
		}
		switch {
		case perr == nil:
			ok = append(ok, m.Seq)
		case errors.Is(perr, ErrSkipped), failed[m.Key]:
			// A follower of a key that already failed in this batch failed because
			// its predecessor did (a whole partition failing): not its own attempt,
			// or it would accrue attempts and park beside the head.
			failed[m.Key] = true
		default:
			failed[m.Key] = true
			r.stats.failures.Add(1)
			f := failure{seq: m.Seq, errText: pgtext.Clean(perr.Error(), maxErrorBytes)}
			if m.Attempt >= r.cfg.MaxAttempts {
				f.park = true
				r.cfg.Logger.ErrorContext(ctx, "outbox relay: event parked; its key waits for an operator",
					"table", r.cfg.Table, "id", m.ID.String(), "key", m.Key, "attempts", m.Attempt, "err", perr)
			} else {
				f.delay = r.cfg.Backoff.Delay(m.Attempt - 1)
			}
			failures = append(failures, f)
		}
	}
	return ok, failures
}
