package publishtest

import (
	"cmp"
	"time"
)

// Defaults of Config.
const (
	DefaultKeys        = 4
	DefaultPerKey      = 8
	DefaultConcurrency = 3
	DefaultTimeout     = 60 * time.Second
)

// Config tunes the kit. Topic and Unroutable are required.
type Config struct {
	// Topic is a Message.Topic the Publisher delivers to a place Broker.Received
	// reads. Required.
	Topic string
	// Unroutable is a Message.Topic the Publisher cannot deliver to (a Kafka
	// topic that does not exist, a subject no stream captures): publishing to
	// it must fail. Required.
	Unroutable string
	// Keys is how many keys each check publishes. Default DefaultKeys (4).
	Keys int
	// PerKey is how many messages each key gets per batch. Default
	// DefaultPerKey (8).
	PerKey int
	// Concurrency is how many Publish calls ConcurrentCallsKeepKeyOrder makes
	// at once. Default DefaultConcurrency (3).
	Concurrency int
	// Timeout bounds each check, waiting for the broker included. Default
	// DefaultTimeout (60 s).
	Timeout time.Duration
}

func (c Config) withDefaults() Config {
	c.Keys = cmp.Or(c.Keys, DefaultKeys)
	c.PerKey = cmp.Or(c.PerKey, DefaultPerKey)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	return c
}

// validate checks a Config after withDefaults. Errors are *ConfigError.
func (c Config) validate() error {
	bad := func(field, reason string) error { return &ConfigError{Field: field, Reason: reason} }
	switch {
	case c.Topic == "":
		return bad("Topic", "required: a topic the publisher delivers and Broker.Received reads")
	case c.Unroutable == "":
		return bad("Unroutable", "required: a topic the publisher cannot deliver to")
	case c.Topic == c.Unroutable:
		return bad("Unroutable", "the same as Topic")
	case c.Keys < 1:
		return bad("Keys", "below 1")
	case c.PerKey < 3:
		return bad("PerKey", "below 3 (the failure check needs a message before and after the failed one)")
	case c.Concurrency < 1:
		return bad("Concurrency", "below 1")
	case c.Timeout < 0:
		return bad("Timeout", "negative")
	}
	return nil
}
