// Package sarama is a stub of github.com/IBM/sarama.
package sarama

type ProducerMessage struct{ Topic string }

type SyncProducer interface {
	SendMessage(msg *ProducerMessage) (partition int32, offset int64, err error)
}

type AsyncProducer interface {
	Input() chan<- *ProducerMessage
}
