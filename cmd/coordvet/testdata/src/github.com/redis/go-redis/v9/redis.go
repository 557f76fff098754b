// Package redis is a stub of github.com/redis/go-redis/v9.
package redis

import (
	"context"
	"time"
)

type Cmd struct{}
type BoolCmd struct{}

func (*BoolCmd) Result() (bool, error) { return true, nil }

type IntCmd struct{}

func (c cmdable) Del(ctx context.Context, keys ...string) *IntCmd { return nil }

type StatusCmd struct{}

type cmdable func(ctx context.Context, cmd any) error

func (c cmdable) SetNX(ctx context.Context, key string, value any, exp time.Duration) *BoolCmd {
	return nil
}

func (c cmdable) Set(ctx context.Context, key string, value any, exp time.Duration) *StatusCmd {
	return nil
}

type SetArgs struct {
	Mode string
	TTL  time.Duration
}

func (c cmdable) SetArgs(ctx context.Context, key string, value any, a SetArgs) *StatusCmd {
	return nil
}

func (c cmdable) Eval(ctx context.Context, script string, keys []string, args ...any) *Cmd {
	return nil
}

type Client struct{ cmdable }

func NewClient(opt any) *Client { return &Client{} }

func (c *Client) Do(ctx context.Context, args ...any) *Cmd { return nil }

type Script struct{}

func NewScript(src string) *Script { return &Script{} }

type Cmdable interface {
	SetNX(ctx context.Context, key string, value any, exp time.Duration) *BoolCmd
}
