package efficiencylock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/efficiencylock"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// A cache warm-up that several replicas may start at once: the lock saves the
// duplicate work, and running it twice would only cost CPU.
func ExampleLocker_TryAcquire() {
	rdb, done := coordtest.ExampleRedis()
	defer done()
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
	rdb, done := coordtest.ExampleRedis()
	defer done()
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
