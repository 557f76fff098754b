// Package kgo is a stub of github.com/twmb/franz-go/pkg/kgo.
package kgo

import "context"

type Record struct {
	Topic string
	Value []byte
}

type ProduceResults []struct{}

func (ProduceResults) FirstErr() error { return nil }

type Client struct{}

func (c *Client) Produce(ctx context.Context, r *Record, promise func(*Record, error)) {}

func (c *Client) ProduceSync(ctx context.Context, rs ...*Record) ProduceResults { return nil }

func (c *Client) Ping(ctx context.Context) error { return nil }
