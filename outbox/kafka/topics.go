package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/coordkit/coordkit/outbox"
)

// checkTopics asks the cluster for the topics' metadata (without creating them)
// and returns an error matching outbox.ErrNoDestination naming the first that
// does not exist.
func checkTopics(ctx context.Context, cl *kgo.Client, topics []string) error {
	if len(topics) == 0 {
		return nil
	}
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("kafka: topic metadata: %w", err)
	}
	for _, t := range resp.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				return fmt.Errorf("kafka: topic %q does not exist: %w", name, outbox.ErrNoDestination)
			}
			return fmt.Errorf("kafka: topic %q: %w", name, err)
		}
	}
	return nil
}
