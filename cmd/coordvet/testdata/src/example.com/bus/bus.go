// Package bus is an in-house broker client, added to the check with -brokers.
package bus

type Client struct{}

func (c *Client) Send(topic string, body []byte) error { return nil }
