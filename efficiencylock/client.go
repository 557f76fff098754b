package efficiencylock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client is the part of a go-redis client the lock uses: SET NX PX and Lua scripts.
// *redis.Client, *redis.ClusterClient, *redis.Ring and redis.UniversalClient
// satisfy it. Every key a Locker touches is a single key, so scripts work on a
// cluster too.
type Client interface {
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
	Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd
	EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd
}

var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
	_ Client = (*redis.Ring)(nil)
	_ Client = redis.UniversalClient(nil)
)
