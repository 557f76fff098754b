package good

import (
	"context"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/efficiencylock"
	"github.com/redis/go-redis/v9"
	"go.etcd.io/etcd/client/v3/concurrency"
)

func ok(ctx context.Context, s *correctnesslease.Session, c *redis.Client, key string) error {
	lease, err := correctnesslease.Acquire(ctx, s, "billing")
	if err != nil {
		return err
	}
	use(lease.Token())
	_, err = efficiencylock.New(c, efficiencylock.DuplicatesHarmless("cache warm-up"), efficiencylock.Config{})
	// Plain Redis use is fine: only locking patterns are reported.
	c.Set(ctx, key, "v", time.Second)
	c.Do(ctx, "SET", key, "v")
	c.Do(ctx, "GET", "nx")
	c.SetArgs(ctx, key, "v", redis.SetArgs{Mode: "XX"})
	c.Eval(ctx, `return redis.call('GET', KEYS[1])`, []string{key})
	_, _ = concurrency.NewSession(nil) // a session alone is no lock
	return err
}

func use(any) {}

// A dedupe marker: SetNX answers "first time?" and the key expires; nothing is held.
func firstDelivery(ctx context.Context, c *redis.Client, id string) (bool, error) {
	return c.SetNX(ctx, "seen:"+id, 1, 24*time.Hour).Result()
}

func processedOnce(ctx context.Context, c *redis.Client, id string) bool {
	ok, _ := c.SetNX(ctx, fmt.Sprintf("processed:%s", id), 1, time.Hour).Result()
	return ok
}
