package bad

import (
	"context"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/redis/go-redis/v9"
	"go.etcd.io/etcd/client/v3/concurrency"
)

var _ = redsync.New // want `pavedroad: redsync, a Redis lock without fencing tokens; fix: use correctnesslease \(fenced\) or efficiencylock \(declared\) \(RFC MUST 3, 4\)`

func etcdLocks(s *concurrency.Session) {
	_ = concurrency.NewMutex(s, "/locks/billing")   // want `pavedroad: concurrency.NewMutex grants authority without a fencing token`
	_ = concurrency.NewLocker(s, "/locks/billing")  // want `concurrency.NewLocker grants authority`
	_ = concurrency.NewElection(s, "/elections/me") // want `concurrency.NewElection grants authority`
}

func redisLocks(ctx context.Context, c *redis.Client, i redis.Cmdable, key string) {
	c.SetNX(ctx, key, "me", time.Second)                                                          // want `Redis SetNX used as a lock`
	i.SetNX(ctx, key, "me", time.Second)                                                          // want `Redis SetNX used as a lock`
	c.Do(ctx, "SET", key, "me", "NX", "PX", 3000)                                                 // want `Redis SET … NX sent through Do`
	c.Do(ctx, "set", key, "me", "px", 3000, "nx")                                                 // want `Redis SET … NX sent through Do`
	c.SetArgs(ctx, key, "me", redis.SetArgs{Mode: "NX", TTL: time.Second})                        // want `Redis SET with Mode NX`
	c.Eval(ctx, `return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])`, []string{key}) // want `Lua script with SET … NX`
	_ = redis.NewScript(lockScript)                                                               // want `Lua script with SET … NX`
}

const lockScript = `if redis.call("set", KEYS[1], ARGV[1], "nx") then return 1 end`

func suppressed(s *concurrency.Session) {
	//coordvet:ignore pavedroad owner=platform expires=2026-09-30 migration shim, removed with ticket OPS-12
	_ = concurrency.NewMutex(s, "/locks/legacy")
	_ = concurrency.NewMutex(s, "/locks/legacy2") //coordvet:ignore pavedroad owner=platform expires=2026-09-30 same shim
}

func unusedDirective() {
	//coordvet:ignore pavedroad owner=platform expires=2026-09-30 nothing to silence here // want `pavedroad: unused exception: //coordvet:ignore pavedroad silences no pavedroad finding on this line or the next; fix: delete it`
	_ = 1
}

// A SetNX whose key is a dedupe marker but which is released like a lock is a lock.
func markerReleased(ctx context.Context, c *redis.Client, id string) {
	c.SetNX(ctx, "seen:"+id, 1, time.Hour) // want `Redis SetNX used as a lock`
	defer c.Del(ctx, "seen:"+id)
}
