package efficiencylock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordkit/efficiencylock"
)

// exampleClient connects to the test Redis (COORD_TEST_REDIS_URL or the local one).
func exampleClient() *redis.Client {
	url := os.Getenv("COORD_TEST_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		panic(err)
	}
	return redis.NewClient(opt)
}

// A cache warm-up that several replicas may start at once: the lock saves the
// duplicate work, and running it twice would only cost CPU.
func ExampleLocker_TryAcquire() {
	rdb := exampleClient()
	defer rdb.Close()
	ctx := context.Background()

	locker, err := efficiencylock.New(rdb,
		efficiencylock.DuplicatesHarmless("catalog cache warm-up: a second warm-up only costs CPU"),
		efficiencylock.Config{Tenant: "example"})
	if err != nil {
		panic(err)
	}
	lock, err := locker.TryAcquire(ctx, "warm-catalog", 10*time.Second, nil)
	if errors.Is(err, efficiencylock.ErrNotAcquired) {
		fmt.Println("another replica is warming the cache")
		return
	}
	if err != nil {
		panic(err)
	}
	defer lock.Release(context.WithoutCancel(ctx))

	// The work runs under lock.Context(): it ends if the lock is lost.
	fmt.Println("warming", lock.Key(), "err:", lock.Context().Err())

	_, err = locker.TryAcquire(ctx, "warm-catalog", 10*time.Second, nil)
	fmt.Println("second replica acquired:", !errors.Is(err, efficiencylock.ErrNotAcquired))
	// Output:
	// warming /tenants/example/locks/warm-catalog err: <nil>
	// second replica acquired: false
}

// Acquire waits for the lock with full-jitter retries, bounded by the context; with
// auto-refresh the guard extends itself every ttl/3 until Release.
func ExampleLocker_Acquire() {
	rdb := exampleClient()
	defer rdb.Close()
	locker, err := efficiencylock.New(rdb,
		efficiencylock.DuplicatesHarmless("nightly report regeneration overwrites the same file"),
		efficiencylock.Config{Tenant: "example", AutoRefresh: true})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lock, err := locker.Acquire(ctx, "nightly-report", 3*time.Second, nil)
	if err != nil {
		fmt.Println("not this time:", err)
		return
	}
	work := lock.Context()
	select {
	case <-work.Done():
		fmt.Println("lost the lock:", context.Cause(work))
	case <-time.After(50 * time.Millisecond): // the report
	}
	fmt.Println("release:", lock.Release(context.Background()))
	fmt.Println("cause after release:", context.Cause(work))
	// Output:
	// release: <nil>
	// cause after release: efficiencylock: released
}
