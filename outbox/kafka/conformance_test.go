package kafka_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/coordkit/coordkit/outbox/kafka"
	"github.com/coordkit/coordkit/testing/publishtest"
)

// kafkaBroker reads back a topic from its start, accumulating across calls.
type kafkaBroker struct {
	cl  *kgo.Client
	mu  sync.Mutex
	got []publishtest.Received
}

func (b *kafkaBroker) Received(ctx context.Context, _ string) ([]publishtest.Received, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	fs := b.cl.PollFetches(fctx)
	for _, e := range fs.Errors() {
		if e.Err != context.DeadlineExceeded && e.Err != context.Canceled {
			return nil, e.Err
		}
	}
	fs.EachRecord(func(r *kgo.Record) {
		h := map[string]string{}
		for _, x := range r.Headers {
			h[x.Key] = string(x.Value)
		}
		b.got = append(b.got, publishtest.Received{Key: string(r.Key), Headers: h, Payload: r.Value})
	})
	return b.got, nil
}

// The Kafka publisher passes the publisher conformance kit against kfake (three
// partitions, franz-go's idempotent producer; a topic that does not exist is
// the undeliverable one).
func TestKafkaPublisherConformance(t *testing.T) {
	cluster, prod := ordersCluster(t)
	cons, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	publishtest.Run(t, newPublisher(t, prod, kafka.Config{}), &kafkaBroker{cl: cons},
		publishtest.Config{Topic: "orders", Unroutable: "missing-topic"})
}
