// Package locks is the batch worker's locking: some of it hand-rolled.
package locks

import (
	"context"
	"example.com/coordvete2e/corpus/defaults"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/efficiencylock"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// LockReport takes a Redis lock by hand.
func LockReport(ctx context.Context, rdb *redis.Client, owner string) (bool, error) {
	ok, err := rdb.SetNX(ctx, "lock:report", owner, 30*time.Second).Result() // corpus: pavedroad
	if err != nil || !ok {
		return false, err
	}
	defer rdb.Del(ctx, "lock:report")
	return true, nil
}

// Elect campaigns with etcd's own election.
func Elect(ctx context.Context, cli *clientv3.Client) error {
	s, err := concurrency.NewSession(cli)
	if err != nil {
		return err
	}
	e := concurrency.NewElection(s, "/elections/report") // corpus: pavedroad
	return e.Campaign(ctx, "me")
}

// Undeclared builds an efficiency lock with a reason computed at run time.
func Undeclared(rdb *redis.Client, job string) (*efficiencylock.Locker, error) {
	return efficiencylock.New(rdb, efficiencylock.DuplicatesHarmless("rebuild "+job), defaults.Of3(efficiencylock.New)) // corpus: efficiencydecl
}

// Corrected cases.

//corpus:negative
func FirstDelivery(ctx context.Context, rdb *redis.Client, id string) (bool, error) {
	return rdb.SetNX(ctx, "seen:"+id, 1, 24*time.Hour).Result()
}

//corpus:negative
func ProcessedOnce(ctx context.Context, rdb *redis.Client, id string) bool {
	ok, _ := rdb.SetNX(ctx, fmt.Sprintf("processed:%s", id), 1, time.Hour).Result()
	return ok
}

//corpus:negative
func Declared(rdb *redis.Client) (*efficiencylock.Locker, error) {
	return efficiencylock.New(rdb, efficiencylock.DuplicatesHarmless("report rebuild: a second run rewrites the same rows"), defaults.Of3(efficiencylock.New))
}

//corpus:negative
func CacheFill(ctx context.Context, rdb *redis.Client, key string) error {
	return rdb.Set(ctx, key, "v", time.Minute).Err()
}
