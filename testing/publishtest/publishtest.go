package publishtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/coordkit/coordkit/outbox"
)

// Broker is the broker side of the adapter under test, as a consumer sees it.
type Broker interface {
	// Received returns the messages the broker holds for topic so far, in the
	// order a consumer receives them: a key's messages in their order (one
	// partition or subject after another is fine: the kit compares orders per
	// key). The kit calls it repeatedly until what it published is there, or
	// its Timeout passes.
	Received(ctx context.Context, topic string) ([]Received, error)
}

// Received is one message as the broker holds it.
type Received struct {
	Key     string            // the record key, subject token or header carrying Message.Key
	Headers map[string]string // outbox.HeaderEventID and outbox.HeaderEventType among them
	Payload []byte
}

// headerName is a header every message the kit publishes carries, to check the
// adapter passes a message's own headers through.
const headerName = "publishtest-check"

// Run runs every check against p, reading back through b, as subtests of t.
// It blocks until they finish (a few seconds on a local broker) and fails t,
// never skips, when p breaks the contract or the broker is unreachable.
func Run(t *testing.T, p outbox.Publisher, b Broker, cfg Config) {
	t.Helper()
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
			defer cancel()
			if err := c.fn(ctx, kit{p: p, b: b, cfg: cfg, run: runID()}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// checks are the kit's checks, in the order Run runs them.
var checks = []struct {
	name string
	fn   func(ctx context.Context, k kit) error
}{
	{"DeliversEveryMessageInKeyOrder", checkDelivers},
	{"KeepsKeyOrderAcrossCalls", checkAcrossCalls},
	{"FailedKeyStopsItsLaterMessages", checkFailedKey},
	{"DoneContextSendsNothing", checkDoneContext},
	{"ConcurrentCallsKeepKeyOrder", checkConcurrent},
}

// kit is what one check needs: the adapter, the broker, the Config and a run
// id that makes the check's keys its own.
type kit struct {
	p   outbox.Publisher
	b   Broker
	cfg Config
	run string
}

func runID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// key is the name of the check's key i.
func (k kit) key(i int) string { return fmt.Sprintf("publishtest-%s-k%d", k.run, i) }

// message builds the n-th message of key on topic.
func (k kit) message(key string, n int, topic string) outbox.Message {
	now := time.Now()
	return outbox.Message{
		ID: outbox.NewID(now), Seq: int64(n), Topic: topic, Key: key, Type: "publishtest.event",
		Payload: []byte(fmt.Sprintf(`{"key":%q,"n":%d}`, key, n)), Headers: map[string]string{headerName: key},
		CreatedAt: now, Attempt: 1,
	}
}

// batch builds perKey messages for each of keys, interleaved (k0:0 k1:0 … k0:1 …).
func (k kit) batch(keys []string, from, perKey int) []outbox.Message {
	var out []outbox.Message
	for n := from; n < from+perKey; n++ {
		for _, key := range keys {
			out = append(out, k.message(key, n, k.cfg.Topic))
		}
	}
	return out
}

func (k kit) keys(from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = k.key(from + i)
	}
	return out
}
