// Package jetstream is a stub of github.com/nats-io/nats.go/jetstream.
package jetstream

import "context"

type PubAck struct{}

type JetStream interface {
	Publish(ctx context.Context, subj string, data []byte) (*PubAck, error)
}
