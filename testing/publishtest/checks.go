package publishtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coordkit/coordkit/outbox"
)

// publishAll publishes msgs and requires every one accepted.
func publishAll(ctx context.Context, p outbox.Publisher, msgs []outbox.Message, why string) error {
	errs := p.Publish(ctx, msgs)
	if errs == nil {
		return nil
	}
	if len(errs) != len(msgs) {
		return fmt.Errorf("publishtest: %s: Publish returned %d errors for %d messages, want nil or one per message", why, len(errs), len(msgs))
	}
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("publishtest: %s: message %d (key %s) failed on a reachable topic: %w", why, i, msgs[i].Key, err)
		}
	}
	return nil // every entry nil: allowed
}

// awaitInOrder waits until every message of want is on the broker, then checks
// each against what was published (key, payload, headers) and that the first
// deliveries of each key come in want's order. None of forbidden may be there.
func (k kit) awaitInOrder(ctx context.Context, want, forbidden []outbox.Message) error {
	byID := map[string]outbox.Message{}
	for _, m := range want {
		byID[m.ID.String()] = m
	}
	banned := map[string]outbox.Message{}
	for _, m := range forbidden {
		banned[m.ID.String()] = m
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		got, err := k.b.Received(ctx, k.cfg.Topic)
		if err != nil {
			return fmt.Errorf("publishtest: Broker.Received(%q): %w", k.cfg.Topic, err)
		}
		seen := map[string]bool{}
		next := map[string]int64{} // per key: the Seq its next first delivery must have
		for _, m := range want {
			if _, ok := next[m.Key]; !ok || m.Seq < next[m.Key] {
				next[m.Key] = m.Seq
			}
		}
		for _, r := range got {
			id := r.Headers[outbox.HeaderEventID]
			if m, ok := banned[id]; ok {
				return fmt.Errorf("publishtest: message %d of key %s reached the broker after an earlier message of its key failed in the same call: per-key order is broken", m.Seq, m.Key)
			}
			m, ok := byID[id]
			if !ok || seen[id] {
				continue // another check's, or a redelivery
			}
			seen[id] = true
			switch {
			case r.Key != m.Key:
				return fmt.Errorf("publishtest: message %s arrived with key %q, want %q", id, r.Key, m.Key)
			case !bytes.Equal(r.Payload, m.Payload):
				return fmt.Errorf("publishtest: message %s arrived with payload %q, want %q", id, r.Payload, m.Payload)
			case r.Headers[outbox.HeaderEventType] != m.Type:
				return fmt.Errorf("publishtest: message %s arrived with %s %q, want %q", id, outbox.HeaderEventType, r.Headers[outbox.HeaderEventType], m.Type)
			case r.Headers[headerName] != m.Key:
				return fmt.Errorf("publishtest: message %s lost its own header %s", id, headerName)
			case m.Seq != next[m.Key]:
				return fmt.Errorf("publishtest: key %s: message %d arrived when %d was next: per-key order is broken", m.Key, m.Seq, next[m.Key])
			}
			next[m.Key] = m.Seq + 1
		}
		if len(seen) == len(want) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("publishtest: %d of %d accepted messages reached the broker before the check's deadline: %w", len(seen), len(want), ctx.Err())
		case <-tick.C:
		}
	}
}

// checkDelivers: one batch of interleaved keys is delivered whole, in key order.
func checkDelivers(ctx context.Context, k kit) error {
	msgs := k.batch(k.keys(0, k.cfg.Keys), 0, k.cfg.PerKey)
	if err := publishAll(ctx, k.p, msgs, "one batch"); err != nil {
		return err
	}
	return k.awaitInOrder(ctx, msgs, nil)
}

// checkAcrossCalls: three successive batches of the same keys stay in order.
func checkAcrossCalls(ctx context.Context, k kit) error {
	keys := k.keys(0, k.cfg.Keys)
	var all []outbox.Message
	for call := range 3 {
		msgs := k.batch(keys, call*k.cfg.PerKey, k.cfg.PerKey)
		if err := publishAll(ctx, k.p, msgs, fmt.Sprintf("call %d of 3", call+1)); err != nil {
			return err
		}
		all = append(all, msgs...)
	}
	return k.awaitInOrder(ctx, all, nil)
}

// checkFailedKey: the key "bad" has a message on the unroutable topic at
// position 1; its message 0 and every other key are delivered, its messages
// from 1 on fail and none of them reaches the broker.
func checkFailedKey(ctx context.Context, k kit) error {
	good := k.keys(0, k.cfg.Keys)
	bad := k.key(k.cfg.Keys)
	var msgs []outbox.Message
	var want, forbidden []outbox.Message
	failedAt := -1
	for n := range k.cfg.PerKey {
		for _, key := range good {
			m := k.message(key, n, k.cfg.Topic)
			msgs, want = append(msgs, m), append(want, m)
		}
		m := k.message(bad, n, k.cfg.Topic)
		switch {
		case n == 0:
			want = append(want, m)
		case n == 1:
			m.Topic = k.cfg.Unroutable
			failedAt = len(msgs)
		default:
			forbidden = append(forbidden, m)
		}
		msgs = append(msgs, m)
	}
	errs := k.p.Publish(ctx, msgs)
	if len(errs) != len(msgs) {
		return fmt.Errorf("publishtest: a batch with an undeliverable message returned %d errors for %d messages, want one per message", len(errs), len(msgs))
	}
	for i, m := range msgs {
		switch {
		case m.Key == bad && m.Seq >= 1 && errs[i] == nil:
			return fmt.Errorf("publishtest: message %d of key %s reported published (nil) after message 1 of its key failed", m.Seq, m.Key)
		case (m.Key != bad || m.Seq == 0) && errs[i] != nil:
			return fmt.Errorf("publishtest: message %d of key %s failed, but only key %s had an undeliverable message: %w", m.Seq, m.Key, bad, errs[i])
		}
	}
	if errors.Is(errs[failedAt], outbox.ErrSkipped) {
		return fmt.Errorf("publishtest: the undeliverable message reported ErrSkipped (not attempted), want the broker's error")
	}
	return k.awaitInOrder(ctx, want, forbidden)
}

// checkDoneContext: with ctx already done, nothing is attempted.
func checkDoneContext(ctx context.Context, k kit) error {
	msgs := k.batch(k.keys(0, k.cfg.Keys), 0, k.cfg.PerKey)
	done, cancel := context.WithCancel(ctx)
	cancel()
	start := time.Now()
	errs := k.p.Publish(done, msgs)
	if took := time.Since(start); took > 5*time.Second {
		return fmt.Errorf("publishtest: Publish with a done context took %v, want it to return at once", took)
	}
	if len(errs) != len(msgs) {
		return fmt.Errorf("publishtest: Publish with a done context returned %d errors for %d messages, want one per message", len(errs), len(msgs))
	}
	for i, err := range errs {
		if !errors.Is(err, outbox.ErrSkipped) {
			return fmt.Errorf("publishtest: Publish with a done context: message %d returned %v, want an error matching outbox.ErrSkipped (not attempted: the relay does not count it toward MaxAttempts)", i, err)
		}
	}
	return nil
}

// checkConcurrent: Concurrency relays publish disjoint keys at once, each in
// three calls.
func checkConcurrent(ctx context.Context, k kit) error {
	var mu sync.Mutex
	var all []outbox.Message
	errc := make(chan error, k.cfg.Concurrency)
	for r := range k.cfg.Concurrency {
		keys := k.keys((r+1)*1000, k.cfg.Keys)
		go func() {
			for call := range 3 {
				msgs := k.batch(keys, call*k.cfg.PerKey, k.cfg.PerKey)
				if err := publishAll(ctx, k.p, msgs, fmt.Sprintf("relay %d, call %d", r, call+1)); err != nil {
					errc <- err
					return
				}
				mu.Lock()
				all = append(all, msgs...)
				mu.Unlock()
			}
			errc <- nil
		}()
	}
	for range k.cfg.Concurrency {
		if err := <-errc; err != nil {
			return err
		}
	}
	return k.awaitInOrder(ctx, all, nil)
}
