// Package message is a stub of github.com/ThreeDotsLabs/watermill/message.
package message

type Message struct{ Payload []byte }

type Publisher interface {
	Publish(topic string, messages ...*Message) error
	Close() error
}
