package kafka_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/outbox/kafka"
)

// The Publisher contract: once a message of a key fails, no later message of
// that key is published in the same call. A record franz-go fails on its own
// (here: larger than the producer's batch limit) must not let the key's next
// record through to the broker.
func TestFailedRecordStopsLaterRecordsOfItsKey(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ProducerBatchMaxBytes(2048),
		kgo.ConsumeTopics("orders"), kgo.RecordDeliveryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pub := newPublisher(t, cl, kafka.Config{})
	msgs := []outbox.Message{
		{ID: outbox.NewID(time.Now()), Topic: "orders", Key: "k", Type: "t", Payload: []byte(strings.Repeat("x", 4096))},
		{ID: outbox.NewID(time.Now()), Topic: "orders", Key: "k", Type: "t", Payload: []byte("small")},
		{ID: outbox.NewID(time.Now()), Topic: "orders", Key: "other", Type: "t", Payload: []byte("fine")},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := pub.Publish(ctx, msgs)
	if len(errs) != 3 || errs[0] == nil {
		t.Fatalf("the oversized record did not fail: %v", errs)
	}
	if !errors.Is(errs[1], outbox.ErrSkipped) || errs[2] != nil {
		t.Fatalf("errors %v: want [failure, ErrSkipped, nil]", errs)
	}
	// The broker holds only the other key's record.
	var got []string
	for len(got) < 1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("fetch: %v (got %v)", ctx.Err(), got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Key)+"="+string(r.Value)) })
	}
	if len(got) != 1 || got[0] != "other=fine" {
		t.Fatalf("broker got %v, want only other=fine", got)
	}
}

// The other rules of the contract (a failed topic stops its key, each error on
// its own message, nothing produced once ctx is done) are checked by
// testing/publishtest in TestKafkaPublisherConformance.
