package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/failstatic"
)

// shopConfig is the typed config the data plane serves.
type shopConfig struct {
	RateLimit int
	Keys      map[string]string
}

// runConfig: a failstatic cache serves the shop's config; an invalid update is
// rejected; then etcd is stopped — reads keep being served, staleness grows, the
// revocations class fails closed at its threshold, and a restarted process starts
// from the last-known-good file on disk.
func runConfig(ctx context.Context, e *env) (string, bool) {
	cli, err := e.etcdClient()
	if err != nil {
		return err.Error(), false
	}
	defer cli.Close()
	prefix, _ := coord.Prefix("shop", coord.KindConfig)
	for k, v := range map[string]string{"rate-limit": "100", "checkout-v2": "on", "revocations/tok-123": "revoked"} {
		if _, err := cli.Put(ctx, prefix+k, v); err != nil {
			return err.Error(), false
		}
	}
	dir, err := os.MkdirTemp("", "coorddemo-config-")
	if err != nil {
		return err.Error(), false
	}
	defer os.RemoveAll(dir)
	const maxStale = 3 * time.Second
	cfg := failstatic.Config[shopConfig]{
		Prefix:    prefix,
		StatePath: filepath.Join(dir, "shop-config.json"),
		Decode: func(kvs []failstatic.KV) (shopConfig, error) {
			c := shopConfig{Keys: map[string]string{}}
			for _, kv := range kvs {
				c.Keys[strings.TrimPrefix(kv.Key, prefix)] = string(kv.Value)
			}
			n, err := strconv.Atoi(c.Keys["rate-limit"])
			c.RateLimit = n
			return c, err
		},
		Validate: func(c shopConfig) error {
			if c.RateLimit <= 0 {
				return fmt.Errorf("rate-limit must be positive, got %d", c.RateLimit)
			}
			return nil
		},
		Classes: []failstatic.KeyClass{{Name: "revocations", Prefix: "revocations/", MaxStaleness: maxStale}},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	cache, err := failstatic.New(ctx, cli, cfg)
	if err != nil {
		return err.Error(), false
	}
	defer cache.Close()
	s := cache.Get()
	step("serving rate-limit=%d from etcd revision %d (%s)", s.Value.RateLimit, s.Revision, s.Source)

	if _, err := cli.Put(ctx, prefix+"rate-limit", "-5"); err != nil {
		return err.Error(), false
	}
	time.Sleep(300 * time.Millisecond)
	s = cache.Get()
	rejectedKept := s.Value.RateLimit == 100
	step("someone writes rate-limit=-5: validation rejects it, still serving rate-limit=%d", s.Value.RateLimit)
	if _, err := cli.Put(ctx, prefix+"rate-limit", "120"); err != nil {
		return err.Error(), false
	}
	time.Sleep(300 * time.Millisecond)
	step("a valid update, rate-limit=120: adopted → %d", cache.Get().Value.RateLimit)

	stopped := make(chan struct{})
	go func() { e.stopEtcd(); close(stopped) }() // a graceful stop takes a while; keep reading meanwhile
	defer func() { <-stopped }()
	step("etcd is stopping. The data plane keeps reading:")
	reads, served, early, late := 0, 0, 0, 0
	closedAt := time.Duration(-1)
	var lastStale time.Duration
	monotonic := true
	start := time.Now()
	for lastStale < maxStale+1500*time.Millisecond && time.Since(start) < 60*time.Second {
		reads++
		s := cache.Get()
		if s.Value.RateLimit == 120 {
			served++
		}
		if s.Staleness < lastStale {
			monotonic = false
		}
		lastStale = s.Staleness
		_, err := cache.GetClass("revocations")
		switch closed := errors.Is(err, failstatic.ErrStale); {
		case closed && s.Staleness < maxStale-time.Second:
			early++
		case !closed && s.Staleness > maxStale+time.Second:
			late++
		case closed && closedAt < 0:
			closedAt = s.Staleness
			step("revocations fail closed at staleness %.1fs (threshold %v); every other key keeps serving", s.Staleness.Seconds(), maxStale)
		}
		time.Sleep(10 * time.Millisecond)
	}
	step("%d reads in %.1fs since etcd began to stop, %d served rate-limit=120; staleness grew monotonically to %.1fs", reads, time.Since(start).Seconds(), served, lastStale.Seconds())
	cache.Close()

	// The restart comes once etcd has stopped answering: a graceful stop can
	// outlast the reads above, and a restart then read etcd, not its disk
	// ("live, revision 51" in the fresh-machine run at d7ea625).
	<-stopped
	t0 := time.Now()
	restarted, err := failstatic.New(ctx, cli, cfg)
	if err != nil {
		return "restart during the outage: " + err.Error(), false
	}
	defer restarted.Close()
	cold := time.Since(t0)
	rs := restarted.Get()
	step("the process restarts during the outage: cold start from disk in %v → rate-limit=%d (%s, revision %d)", cold.Round(time.Millisecond), rs.Value.RateLimit, rs.Source, rs.Revision)

	fromDisk := rs.Source == failstatic.SourceDisk && rs.Value.RateLimit == 120
	failedClosed := closedAt >= 0 && early == 0 && late == 0
	verdict := fmt.Sprintf("%d/%d reads served while etcd was down; invalid update rejected: %v; revocations failed closed at %.1fs (threshold %v); restart served from disk: %v",
		served, reads, rejectedKept, closedAt.Seconds(), maxStale, fromDisk)
	return verdict, served == reads && rejectedKept && monotonic && failedClosed && fromDisk
}
