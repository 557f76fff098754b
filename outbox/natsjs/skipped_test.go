package natsjs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/outbox/natsjs"
)

// Messages not sent because ctx was already done are not attempts: they report
// outbox.ErrSkipped (the relay does not count them toward MaxAttempts), not the
// context error.
func TestMessagesNotSentAfterCtxDoneAreSkipped(t *testing.T) {
	_, js, _, prefix := jetStream(t, time.Minute)
	pub := newPublisher(t, js, natsjs.Config{Subject: func(m outbox.Message) string { return prefix + "." + m.Topic }})
	msgs := []outbox.Message{
		{ID: outbox.NewID(time.Now()), Topic: "orders", Key: "a", Type: "t", Payload: []byte("1")},
		{ID: outbox.NewID(time.Now()), Topic: "orders", Key: "b", Type: "t", Payload: []byte("2")},
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	errs := pub.Publish(ctx, msgs)
	if len(errs) != 2 {
		t.Fatalf("errors %v", errs)
	}
	for i, err := range errs {
		if !errors.Is(err, outbox.ErrSkipped) {
			t.Fatalf("message %d: %v, want ErrSkipped", i, err)
		}
	}
}
