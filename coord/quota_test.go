package coord

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"
)

// stepClock is a minimal manual clock for this package's tests (coordtest has the
// full fake clock, but coord must not import it).
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time                 { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *stepClock) NewTimer(d time.Duration) Timer { return neverTimer{} }

// neverTimer never fires: the step clock moves only when a test advances it.
type neverTimer struct{}

func (neverTimer) C() <-chan time.Time      { return nil }
func (neverTimer) Stop() bool               { return true }
func (neverTimer) Reset(time.Duration) bool { return true }

func (c *stepClock) advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func TestQuotaValueSize(t *testing.T) {
	q := NewQuotas(QuotaConfig{})
	if err := q.AllowWrite("/tenants/a/config/x", 1, DefaultMaxValueBytes); err != nil {
		t.Fatalf("64 KiB refused: %v", err)
	}
	err := q.AllowWrite("/tenants/a/config/x", 1, DefaultMaxValueBytes+1)
	var qe *QuotaError
	if !errors.As(err, &qe) || !errors.Is(err, ErrQuotaExceeded) || qe.Quota != "value_bytes" || qe.Tenant != "a" {
		t.Fatalf("64 KiB + 1: %v", err)
	}
	if err := q.AllowWrite("/elsewhere/x", 1, 1); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("key outside layout: %v", err)
	}
}

func TestQuotaRate(t *testing.T) {
	c := &stepClock{now: time.Unix(0, 0)}
	q := NewQuotas(QuotaConfig{Clock: c, Overrides: map[string]Limits{"big": {WritesPerSecond: 1000}}})
	allowed := 0
	for i := 0; i < 1000; i++ {
		if q.AllowWrite("/tenants/a/locks/x", 1, 0) == nil {
			allowed++
		}
	}
	if allowed != DefaultWritesPerSecond {
		t.Fatalf("allowed %d writes in one instant, want burst %d", allowed, DefaultWritesPerSecond)
	}
	// Another tenant is unaffected, and an approved override gets its own rate.
	if err := q.AllowWrite("/tenants/b/locks/x", 1, 0); err != nil {
		t.Fatalf("tenant b throttled by a: %v", err)
	}
	big := 0
	for i := 0; i < 2000; i++ {
		if q.AllowWrite("/tenants/big/locks/x", 1, 0) == nil {
			big++
		}
	}
	if big != 1000 {
		t.Fatalf("override allowed %d", big)
	}
	// Refill: 100 ms at 200/s gives 20 more writes.
	c.advance(100 * time.Millisecond)
	allowed = 0
	for i := 0; i < 100; i++ {
		if q.AllowWrite("/tenants/a/locks/x", 1, 0) == nil {
			allowed++
		}
	}
	if allowed != 20 {
		t.Fatalf("after 100ms allowed %d, want 20", allowed)
	}
}

// The per-tenant buckets do not grow without bound: a bucket that has refilled is
// the same as no bucket, so it is dropped; and however many tenants write at once,
// at most QuotaConfig.MaxTenants buckets are held (the least recently seen goes).
func TestQuotaBucketsAreBounded(t *testing.T) {
	c := &stepClock{now: time.Unix(0, 0)}
	q := NewQuotas(QuotaConfig{Clock: c})
	const tenants = 3 * DefaultMaxTenants
	for i := range tenants {
		if err := q.AllowWrite("/tenants/t"+strconv.Itoa(i)+"/locks/x", 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(q.writes.buckets); n > DefaultMaxTenants {
		t.Fatalf("%d tenants wrote at one instant: %d buckets held, want at most %d", tenants, n, DefaultMaxTenants)
	}
	// One second later every bucket has refilled (burst 200 at 200/s): a few more
	// writes sweep them out.
	c.advance(time.Second)
	for i := range 64 {
		if err := q.AllowWrite("/tenants/late"+strconv.Itoa(i)+"/locks/x", 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(q.writes.buckets); n > 64+2*64 {
		t.Fatalf("after every idle bucket refilled: %d buckets held, want only the recent writers'", n)
	}
}

// Dropping buckets never loosens a limit while there is room: a drained tenant
// stays throttled however many other tenants come and go.
func TestQuotaDrainedTenantStaysThrottled(t *testing.T) {
	c := &stepClock{now: time.Unix(0, 0)}
	q := NewQuotas(QuotaConfig{Clock: c, MaxTenants: 100})
	for q.AllowWrite("/tenants/hot/locks/x", 1, 0) == nil {
	}
	for round := range 50 {
		c.advance(10 * time.Millisecond) // hot refills 2 writes per 10 ms; spend them
		for i := range 90 {
			_ = q.AllowWrite("/tenants/churn"+strconv.Itoa(round*90+i)+"/locks/x", 1, 0)
		}
		allowed := 0
		for q.AllowWrite("/tenants/hot/locks/x", 1, 0) == nil {
			allowed++
		}
		if allowed > 2 {
			t.Fatalf("round %d: the drained tenant got %d writes in 10 ms, want at most 2 (200/s)", round, allowed)
		}
	}
	if n := len(q.writes.buckets); n > 100 {
		t.Fatalf("%d buckets held, want at most MaxTenants 100", n)
	}
}

func TestQuotaWatches(t *testing.T) {
	q := NewQuotas(QuotaConfig{Overrides: map[string]Limits{"small": {MaxWatches: 2}}})
	r1, err := q.OpenWatch("/tenants/small/config/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.OpenWatch("/tenants/small/members/"); err != nil {
		t.Fatal(err)
	}
	_, err = q.OpenWatch("/tenants/small/elections/")
	var qe *QuotaError
	if !errors.As(err, &qe) || qe.Quota != "watches" || qe.Tenant != "small" || qe.Limit != 2 {
		t.Fatalf("third watch of a tenant limited to 2: %v", err)
	}
	r1()
	r1() // idempotent
	if n := q.Watches("small"); n != 1 {
		t.Fatalf("after one release: %d watches", n)
	}
	if _, err := q.OpenWatch("/tenants/small/elections/"); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if rel, err := q.OpenWatch("/outside/layout/"); err != nil || q.Watches("outside") != 0 {
		t.Fatalf("a prefix outside the layout is not charged: %v", err)
	} else {
		rel()
	}
}

func TestQuotaReconnectBudget(t *testing.T) {
	c := &stepClock{now: time.Unix(0, 0)}
	q := NewQuotas(QuotaConfig{Clock: c})
	allowed := 0
	var wait time.Duration
	for range 100 {
		d, err := q.AllowReconnect("/tenants/a/members/")
		if err == nil {
			allowed++
			continue
		}
		var qe *QuotaError
		if !errors.As(err, &qe) || qe.Quota != "watch_opens_per_second" {
			t.Fatalf("refusal: %v", err)
		}
		wait = d
	}
	if allowed != DefaultWatchOpenBurst {
		t.Fatalf("allowed %d reconnects at once, want the burst %d", allowed, DefaultWatchOpenBurst)
	}
	if want := time.Second / DefaultWatchOpensPerSecond; wait <= 0 || wait > want {
		t.Fatalf("retry after %v, want (0, %v]", wait, want)
	}
	c.advance(wait)
	if _, err := q.AllowReconnect("/tenants/a/members/"); err != nil {
		t.Fatalf("after the advised wait: %v", err)
	}
	if _, err := q.AllowReconnect("/tenants/b/members/"); err != nil {
		t.Fatalf("tenant b paced by a: %v", err)
	}
}

func TestQuotaWaitWritePaces(t *testing.T) {
	c := &stepClock{now: time.Unix(0, 0)}
	q := NewQuotas(QuotaConfig{Clock: c, Default: Limits{WritesPerSecond: 10}})
	ctx := context.Background()
	for range 10 { // the burst
		if n, err := q.WaitWrite(ctx, "/tenants/a/elections/x", 1); err != nil || n != 0 {
			t.Fatalf("within the burst: waited %d, %v", n, err)
		}
	}
	// The next write must wait for a token: the step clock does not move by
	// itself, so WaitWrite blocks until ctx ends.
	short, cancel := context.WithCancel(ctx)
	cancel()
	if n, err := q.WaitWrite(short, "/tenants/a/elections/x", 1); !errors.Is(err, context.Canceled) || n != 1 {
		t.Fatalf("over the rate with ctx ended: waited %d, %v", n, err)
	}
	c.advance(100 * time.Millisecond) // one token at 10/s
	if n, err := q.WaitWrite(ctx, "/tenants/a/elections/x", 1); err != nil || n != 0 {
		t.Fatalf("after a token refilled: waited %d, %v", n, err)
	}
	if _, err := q.WaitWrite(ctx, "/elsewhere", 1); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("outside the layout: %v", err)
	}
}
