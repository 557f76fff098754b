package natsjs_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/outbox/natsjs"
	"github.com/coordkit/coordkit/testing/publishtest"
)

// natsBroker reads back a stream through an ordered consumer, accumulating
// across calls; the message key is the subject's last token.
type natsBroker struct {
	cons jetstream.Consumer
	mu   sync.Mutex
	got  []publishtest.Received
}

func (b *natsBroker) Received(ctx context.Context, _ string) ([]publishtest.Received, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	batch, err := b.cons.FetchNoWait(500)
	if err != nil {
		return nil, err
	}
	for m := range batch.Messages() {
		h := map[string]string{}
		for k := range m.Headers() {
			h[k] = m.Headers().Get(k)
		}
		subj := m.Subject()
		b.got = append(b.got, publishtest.Received{Key: subj[strings.LastIndex(subj, ".")+1:], Headers: h, Payload: m.Data()})
	}
	return b.got, batch.Error()
}

// The JetStream publisher passes the publisher conformance kit against the
// local nats-server (a subject no stream captures is the undeliverable one).
func TestNatsPublisherConformance(t *testing.T) {
	_, js, stream, prefix := jetStream(t, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	pub := newPublisher(t, js, natsjs.Config{Subject: func(m outbox.Message) string {
		if m.Topic == "orders" {
			return prefix + ".orders." + m.Key
		}
		return "nostream-" + prefix + "." + m.Topic
	}})
	publishtest.Run(t, pub, &natsBroker{cons: cons}, publishtest.Config{Topic: "orders", Unroutable: "missing"})
}
