package publishtest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/outbox"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memBroker holds what was published, per topic; it refuses the unroutable topic.
type memBroker struct {
	mu     sync.Mutex
	topics map[string][]Received
}

var errNoTopic = errors.New("memBroker: no such topic")

func (b *memBroker) send(_ context.Context, m outbox.Message) error {
	if m.Topic == "unroutable" {
		return errNoTopic
	}
	h := map[string]string{outbox.HeaderEventID: m.ID.String(), outbox.HeaderEventType: m.Type}
	for k, v := range m.Headers {
		h[k] = v
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.topics[m.Topic] = append(b.topics[m.Topic], Received{Key: m.Key, Headers: h, Payload: m.Payload})
	return nil
}

func (b *memBroker) Received(_ context.Context, topic string) ([]Received, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Received(nil), b.topics[topic]...), nil
}

func newMem() *memBroker { return &memBroker{topics: map[string][]Received{}} }

// publisherFunc adapts a whole-batch function (the broken publishers below).
type publisherFunc func(ctx context.Context, msgs []outbox.Message) []error

func (f publisherFunc) Publish(ctx context.Context, msgs []outbox.Message) []error {
	return f(ctx, msgs)
}

// Broken publishers, each breaking one rule of the contract.
func brokenPublishers(b *memBroker) map[string]publisherFunc {
	return map[string]publisherFunc{
		// keeps publishing a key after its failure: the order bug the contract forbids
		"ignores failures": func(ctx context.Context, msgs []outbox.Message) []error {
			errs := make([]error, len(msgs))
			var failed bool
			for i, m := range msgs {
				errs[i] = b.send(ctx, m)
				failed = failed || errs[i] != nil
			}
			if !failed {
				return nil
			}
			return errs
		},
		// reports success for a message it dropped
		"drops one": func(ctx context.Context, msgs []outbox.Message) []error {
			for _, m := range msgs[1:] {
				if err := b.send(ctx, m); err != nil {
					return []error{err}
				}
			}
			return nil
		},
		// publishes each batch backwards
		"reverses": func(ctx context.Context, msgs []outbox.Message) []error {
			errs := make([]error, len(msgs))
			for i := len(msgs) - 1; i >= 0; i-- {
				errs[i] = b.send(ctx, msgs[i])
			}
			return errs
		},
		// sends although ctx is done, and reports success
		"ignores ctx": func(ctx context.Context, msgs []outbox.Message) []error {
			for _, m := range msgs {
				if err := b.send(context.Background(), m); err != nil {
					return nil
				}
			}
			return nil
		},
	}
}

// The kit passes publishers built on outbox.KeyedPublisher (one lane, several
// lanes) and fails each broken one on the check that holds its rule: a kit that
// cannot fail certifies nothing.
func TestKitCatchesBrokenPublishers(t *testing.T) {
	cfg := Config{Topic: "orders", Unroutable: "unroutable", Timeout: 3 * time.Second}.withDefaults()
	run := func(p outbox.Publisher, b Broker) map[string]error {
		out := map[string]error{}
		for _, c := range checks {
			ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
			out[c.name] = c.fn(ctx, kit{p: p, b: b, cfg: cfg, run: runID()})
			cancel()
		}
		return out
	}
	for _, lanes := range []int{1, 4} {
		b := newMem()
		p, err := outbox.NewKeyedPublisher(outbox.KeyedConfig{Send: b.send, Lanes: lanes})
		if err != nil {
			t.Fatal(err)
		}
		for name, err := range run(p, b) {
			if err != nil {
				t.Errorf("KeyedPublisher with %d lanes failed %s: %v", lanes, name, err)
			}
		}
	}
	caughtBy := map[string]string{
		"ignores failures": "FailedKeyStopsItsLaterMessages",
		"drops one":        "DeliversEveryMessageInKeyOrder",
		"reverses":         "DeliversEveryMessageInKeyOrder",
		"ignores ctx":      "DoneContextSendsNothing",
	}
	b := newMem()
	for name, p := range brokenPublishers(b) {
		err := run(p, b)[caughtBy[name]]
		if err == nil {
			t.Errorf("the publisher that %s passed %s", name, caughtBy[name])
			continue
		}
		if !strings.HasPrefix(err.Error(), "publishtest: ") {
			t.Errorf("%s: error without the kit's prefix: %v", name, err)
		}
		t.Logf("%s, caught by %s: %v", name, caughtBy[name], err)
	}
}

// An invalid Config is a *ConfigError naming the field.
func TestConfigValidation(t *testing.T) {
	for field, cfg := range map[string]Config{
		"Topic":      {Unroutable: "x"},
		"Unroutable": {Topic: "x"},
		"PerKey":     {Topic: "x", Unroutable: "y", PerKey: 2},
	} {
		var ce *ConfigError
		if err := cfg.withDefaults().validate(); !errors.As(err, &ce) || ce.Field != field || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Config %+v: %v, want a *ConfigError for %s", cfg, err, field)
		}
	}
}
