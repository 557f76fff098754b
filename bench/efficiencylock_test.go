package bench

// Side-by-side benchmarks of efficiencylock against a raw SET NX PX + Lua delete,
// bsm/redislock and go-redsync/redsync/v4, all on the same Redis in the same run.
// Implementations are interleaved (in rotating order) so the load other processes
// put on the machine is shared evenly; each benchmark reports every
// implementation's figure and the ratios ours ÷ peer.
//
//	cd bench && go test -run '^$' -bench EfficiencyLock -benchtime 2s .

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/coordkit/coordkit/efficiencylock"
	"github.com/coordkit/coordkit/testing/coordtest"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

const lockBenchTTL = 10 * time.Second

// lockImpl is one acquire+release on key.
type lockImpl struct {
	name string
	op   func(ctx context.Context, key string) error
}

func lockImpls(b *testing.B) ([]lockImpl, *coordtest.RedisDB) {
	db := coordtest.Redis(b)
	c := db.Client

	release := redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)
	raw := func(ctx context.Context, key string) error {
		var v [16]byte
		rand.Read(v[:])
		val := base64.RawURLEncoding.EncodeToString(v[:])
		ok, err := c.SetNX(ctx, db.Prefix+"raw:"+key, val, lockBenchTTL).Result()
		if err != nil || !ok {
			return fmt.Errorf("raw: %v %v", ok, err)
		}
		return release.Run(ctx, c, []string{db.Prefix + "raw:" + key}, val).Err()
	}

	locker, err := efficiencylock.New(c, efficiencylock.DuplicatesHarmless("benchmark: nothing runs under the lock"),
		efficiencylock.Config{Tenant: db.Tenant})
	if err != nil {
		b.Fatal(err)
	}
	ours := func(ctx context.Context, key string) error {
		lk, err := locker.TryAcquire(ctx, key, lockBenchTTL, nil)
		if err != nil {
			return err
		}
		return lk.Release(ctx)
	}

	rl := redislock.New(c)
	bsm := func(ctx context.Context, key string) error {
		lk, err := rl.Obtain(ctx, db.Prefix+"bsm:"+key, lockBenchTTL, nil)
		if err != nil {
			return err
		}
		return lk.Release(ctx)
	}

	rs := redsync.New(goredis.NewPool(c))
	rsync := func(ctx context.Context, key string) error {
		m := rs.NewMutex(db.Prefix+"redsync:"+key, redsync.WithExpiry(lockBenchTTL), redsync.WithTries(1))
		if err := m.LockContext(ctx); err != nil {
			return err
		}
		_, err := m.UnlockContext(ctx)
		return err
	}
	return []lockImpl{{"raw", raw}, {"efficiencylock", ours}, {"redislock", bsm}, {"redsync", rsync}}, db
}

func p50(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

func p99(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)*99/100]
}

// BenchmarkEfficiencyLockSequential: one goroutine, acquire+release of one key,
// the four implementations interleaved; reports p50/p99 µs and p50 ratios.
// One b.N iteration is one acquire+release of every implementation.
func BenchmarkEfficiencyLockSequential(b *testing.B) {
	impls, _ := lockImpls(b)
	ctx := context.Background()
	for _, im := range impls { // warm up connections and script caches
		for range 50 {
			if err := im.op(ctx, "seq"); err != nil {
				b.Fatalf("%s: %v", im.name, err)
			}
		}
	}
	lat := make([][]time.Duration, len(impls))
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for j := range impls {
			k := (i + j) % len(impls)
			start := time.Now()
			if err := impls[k].op(ctx, "seq"); err != nil {
				b.Fatalf("%s: %v", impls[k].name, err)
			}
			lat[k] = append(lat[k], time.Since(start))
		}
	}
	b.StopTimer()
	med := make([]time.Duration, len(impls))
	for k, im := range impls {
		med[k] = p50(lat[k])
		b.ReportMetric(float64(med[k].Nanoseconds())/1e3, im.name+"-p50-µs")
		b.ReportMetric(float64(p99(lat[k]).Nanoseconds())/1e3, im.name+"-p99-µs")
	}
	b.ReportMetric(float64(med[1])/float64(med[0]), "ours/raw-p50")
	b.ReportMetric(float64(med[1])/float64(med[2]), "ours/redislock-p50")
	b.ReportMetric(float64(med[1])/float64(med[3]), "ours/redsync-p50")
}

// BenchmarkEfficiencyLockParallel16: 16 goroutines, each on its own key, run a
// block of acquire+release per implementation, implementations in rotating order;
// reports op/s per implementation and throughput ratios. One b.N iteration is one
// block (16 × 25 operations) of every implementation.
func BenchmarkEfficiencyLockParallel16(b *testing.B) {
	const goroutines, perG = 16, 25
	impls, _ := lockImpls(b)
	ctx := context.Background()
	elapsed := make([]time.Duration, len(impls))
	ops := make([]int, len(impls))
	var roundRaw, roundRedislock, roundRedsync []float64 // per-round ratios ours ÷ peer
	block := func(im lockImpl) time.Duration {
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		start := time.Now()
		for g := range goroutines {
			wg.Go(func() {
				key := fmt.Sprintf("par-%d", g)
				for range perG {
					if err := im.op(ctx, key); err != nil {
						errs <- fmt.Errorf("%s: %w", im.name, err)
						return
					}
				}
			})
		}
		wg.Wait()
		d := time.Since(start)
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		return d
	}
	for _, im := range impls {
		block(im) // warm-up: fill the pool, load the scripts
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		var round [4]time.Duration
		for j := range impls {
			k := (i + j) % len(impls)
			round[k] = block(impls[k])
			elapsed[k] += round[k]
			ops[k] += goroutines * perG
		}
		// Same op count per block: the throughput ratio is the inverse time ratio.
		roundRaw = append(roundRaw, float64(round[0])/float64(round[1]))
		roundRedislock = append(roundRedislock, float64(round[2])/float64(round[1]))
		roundRedsync = append(roundRedsync, float64(round[3])/float64(round[1]))
	}
	b.StopTimer()
	rate := make([]float64, len(impls))
	for k, im := range impls {
		rate[k] = float64(ops[k]) / elapsed[k].Seconds()
		b.ReportMetric(rate[k], im.name+"-op/s")
	}
	b.ReportMetric(rate[1]/rate[0], "ours/raw-tput")
	b.ReportMetric(rate[1]/rate[2], "ours/redislock-tput")
	b.ReportMetric(rate[1]/rate[3], "ours/redsync-tput")
	// The median of the per-round ratios resists the load other processes put on
	// the machine in bursts better than the ratio of totals.
	median := func(x []float64) float64 { slices.Sort(x); return x[len(x)/2] }
	b.ReportMetric(median(roundRaw), "ours/raw-tput-median")
	b.ReportMetric(median(roundRedislock), "ours/redislock-tput-median")
	b.ReportMetric(median(roundRedsync), "ours/redsync-tput-median")
}

// BenchmarkEfficiencyLockOps: each implementation alone, for ns/op and allocations
// (run with -benchmem) and client CPU per operation. Not interleaved: use the two benchmarks above for ratios.
func BenchmarkEfficiencyLockOps(b *testing.B) {
	impls, _ := lockImpls(b)
	ctx := context.Background()
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				if err := im.op(ctx, "ops"); err != nil {
					b.Fatal(err)
				}
			}
			// Client CPU per operation (user+sys of this process, GC included): on a
			// saturated machine it is what bounds throughput, and unlike wall time it
			// barely depends on the load of other processes.
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU returns the user+sys CPU time consumed by this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
