package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/coordkit/coordkit/outbox"
)

// ConsumerConfig configures a Consumer: the inbox, the pool, the handler and
// what happens to a record that keeps failing. See outbox.ConsumerConfig.
type ConsumerConfig = outbox.ConsumerConfig[*kgo.Record]

// Consumer delivers a consumer group's records to a handler effectively once:
// each record runs in a transaction with its inbox record (outbox.Consumer), and
// a partition's offset is committed only past records whose transaction
// committed (or that were given up). Records of one partition are handled one
// at a time, in offset order; partitions in parallel. A failing record is
// retried in place with backoff — the partition waits, so its order holds —
// and given up (dead-lettered, if configured) when its handler fails on the
// MaxDeliveries-th try.
//
// Rebalances wait for the poll in hand (franz-go's BlockRebalanceOnPoll): a
// partition is revoked only after its handled records were committed, and when
// a rebalance is pending, processing stops at the next record boundary, commits,
// and rewinds the partitions it did not finish, so a revoked partition never has
// an offset committed past what its new owner must process.
type Consumer struct {
	core        *outbox.Consumer[*kgo.Record]
	cl          *kgo.Client
	topics      []string
	hurry       chan struct{} // a rebalance is waiting for the poll in hand
	retries     sync.Map      // partitionOffset → tries so far, for records retried across polls
	revoked     atomic.Int64
	lost        atomic.Int64
	interrupted atomic.Int64
}

type partitionOffset struct {
	topic     string
	partition int32
	offset    int64
}

// ConsumerStats counts what a Consumer saw of its group.
type ConsumerStats struct {
	Revoked     int64 // rebalances that revoked partitions from this member
	Lost        int64 // partitions lost (a fatal group error: nothing is committed for them)
	Interrupted int64 // polls cut short at a record boundary because a rebalance was waiting
}

// NewConsumer creates the franz-go client from opts — seed brokers, the
// consumer group (kgo.ConsumerGroup) and its topics (kgo.ConsumeTopics), TLS,
// SASL — plus what the helper relies on: kgo.DisableAutoCommit,
// kgo.BlockRebalanceOnPoll and the partition callbacks. Do not pass autocommit
// or OnPartitions* options yourself. It returns an error matching
// outbox.ErrInvalidConfig for a bad cfg or without a consumer group, or the
// client's error. The Consumer owns the client: Run closes it.
func NewConsumer(cfg ConsumerConfig, opts ...kgo.Opt) (*Consumer, error) {
	core, err := outbox.NewConsumer(cfg)
	if err != nil {
		return nil, err
	}
	c := &Consumer{core: core, hurry: make(chan struct{}, 1)}
	opts = append(opts[:len(opts):len(opts)],
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsCallbackBlocked(func(context.Context, *kgo.Client) {
			select {
			case c.hurry <- struct{}{}:
			default:
			}
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
			if len(revoked) > 0 {
				c.revoked.Add(1)
				c.forget(revoked)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			for _, ps := range lost {
				c.lost.Add(int64(len(ps)))
			}
			c.forget(lost)
		}),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		// The options are validated here; without kgo.ConsumerGroup, franz-go
		// refuses the group options added above.
		return nil, &outbox.ConfigError{Field: "opts", Reason: fmt.Sprintf("a consumer needs kgo.ConsumerGroup and kgo.ConsumeTopics: %v", err)}
	}
	c.topics, _ = cl.OptValue(kgo.ConsumeTopics).([]string)
	if regex, _ := cl.OptValue(kgo.ConsumeRegex).(bool); regex {
		c.topics = nil // patterns: nothing to check at start
	}
	c.cl = cl
	return c, nil
}

// forget drops the retry counts of partitions this member no longer owns.
func (c *Consumer) forget(gone map[string][]int32) {
	c.retries.Range(func(k, _ any) bool {
		po := k.(partitionOffset)
		for _, p := range gone[po.topic] {
			if p == po.partition {
				c.retries.Delete(k)
			}
		}
		return true
	})
}

// Stats returns the group events this Consumer saw.
func (c *Consumer) Stats() ConsumerStats {
	return ConsumerStats{Revoked: c.revoked.Load(), Lost: c.lost.Load(), Interrupted: c.interrupted.Load()}
}

// Run consumes until ctx is done, then commits what it handled, leaves the group,
// closes the client and returns nil. The record in hand when ctx is cancelled is
// rolled back (its context is ctx) and not committed: the partition's next owner
// handles it. It first checks that the consumed topics exist: a missing one is
// reported at once, named, matching outbox.ErrNoDestination. Call Run once.
func (c *Consumer) Run(ctx context.Context) error {
	defer c.cl.Close()
	if err := checkTopics(ctx, c.cl, c.topics); err != nil {
		return err
	}
	for {
		fs := c.cl.PollRecords(ctx, 0)
		if ctx.Err() != nil || fs.IsClientClosed() {
			c.cl.AllowRebalance()
			return nil
		}
		fs.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.Canceled) {
				c.core.Config().Logger.WarnContext(ctx, "kafka consumer: fetch failed", "topic", topic, "partition", partition, "err", err)
			}
		})
		c.settle(ctx, c.process(ctx, fs))
		c.cl.AllowRebalance()
	}
}

// progress is what process did with one partition's records.
type progress struct {
	last *kgo.Record // the last record handled (committed or given up); nil for none
	next *kgo.Record // the first record not handled; nil when all were
}

// process handles the fetched records, partitions in parallel, each partition in
// order, until done, ctx is cancelled or a rebalance is waiting.
func (c *Consumer) process(ctx context.Context, fs kgo.Fetches) []progress {
	select { // a signal left over from a rebalance that already ran
	case <-c.hurry:
	default:
	}
	stop := make(chan struct{})
	stopOnce := sync.OnceFunc(func() { close(stop) })
	defer stopOnce()
	var hurried atomic.Bool
	go func() {
		select {
		case <-c.hurry:
			hurried.Store(true)
			stopOnce()
		case <-ctx.Done():
		case <-stop:
		}
	}()
	var mu sync.Mutex
	var out []progress
	var wg sync.WaitGroup
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		wg.Go(func() {
			pr := c.partition(ctx, stop, p.Records)
			mu.Lock()
			out = append(out, pr)
			mu.Unlock()
		})
	})
	wg.Wait()
	if hurried.Load() {
		for _, pr := range out {
			if pr.next != nil {
				c.interrupted.Add(1)
				break
			}
		}
	}
	return out
}

// partition handles one partition's records in order; it stops before a record
// when ctx is done or stop is closed.
func (c *Consumer) partition(ctx context.Context, stop <-chan struct{}, recs []*kgo.Record) progress {
	var pr progress
	for _, rec := range recs {
		if !c.handle(ctx, stop, rec) {
			pr.next = rec
			return pr
		}
		pr.last = rec
	}
	return pr
}

// handle tries rec until it is committed or given up (true), or until ctx is
// done or stop is closed (false).
func (c *Consumer) handle(ctx context.Context, stop <-chan struct{}, rec *kgo.Record) bool {
	po := partitionOffset{rec.Topic, rec.Partition, rec.Offset}
	id := ""
	for _, h := range rec.Headers {
		if h.Key == outbox.HeaderEventID {
			id = string(h.Value)
		}
	}
	tries := 0
	if v, ok := c.retries.Load(po); ok {
		tries = v.(int)
	}
	for {
		select {
		case <-stop:
			return false
		default:
		}
		tries++
		v := c.core.Handle(ctx, rec, id, tries)
		if v.Action != outbox.Retry {
			c.retries.Delete(po)
			return true
		}
		c.retries.Store(po, tries)
		if ctx.Err() != nil {
			return false
		}
		t := time.NewTimer(v.Delay)
		select {
		case <-t.C:
		case <-stop:
			t.Stop()
			return false
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

// settle commits each partition past its handled records and rewinds the
// partitions whose records were not all handled, so they are fetched again
// (here, or by the next owner from the committed offset).
func (c *Consumer) settle(ctx context.Context, prs []progress) {
	var done []*kgo.Record
	rewind := map[string]map[int32]kgo.EpochOffset{}
	for _, pr := range prs {
		if pr.last != nil {
			done = append(done, pr.last)
		}
		if pr.next != nil {
			if rewind[pr.next.Topic] == nil {
				rewind[pr.next.Topic] = map[int32]kgo.EpochOffset{}
			}
			rewind[pr.next.Topic][pr.next.Partition] = kgo.EpochOffset{Epoch: pr.next.LeaderEpoch, Offset: pr.next.Offset}
		}
	}
	if len(done) > 0 {
		// Commit even when ctx is done: these transactions committed.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err := c.cl.CommitRecords(cctx, done...)
		cancel()
		if err != nil {
			// Not fatal: the records are handled again (by us or the next
			// owner) and the inbox skips them.
			c.core.Config().Logger.WarnContext(ctx, "kafka consumer: offset commit failed", "err", err)
		}
	}
	if len(rewind) > 0 && ctx.Err() == nil {
		c.cl.SetOffsets(rewind)
	}
}
