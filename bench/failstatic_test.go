package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// fsConf is the decoded config of the failstatic benchmarks.
type fsConf struct{ flags map[string]string }

func fsDecode(kvs []failstatic.KV) (*fsConf, error) {
	c := &fsConf{flags: make(map[string]string, len(kvs))}
	for _, kv := range kvs {
		c.flags[kv.Key] = string(kv.Value)
	}
	return c, nil
}

// fsPrefix is where the failstatic benchmarks keep their flags.
const fsPrefix = "/tenants/bench/config/"

func fsConfig(statePath string) failstatic.Config[*fsConf] {
	return failstatic.Config[*fsConf]{
		Prefix:    fsPrefix,
		Decode:    fsDecode,
		StatePath: statePath,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// fsEtcd starts etcd holding 100 flags under fsPrefix, flag-000 to flag-099.
func fsEtcd(b *testing.B) (*coordtest.EtcdServer, *clientv3.Client) {
	b.Helper()
	etcd := coordtest.Etcd(b)
	cli := etcd.Client(b)
	for i := range 100 {
		if _, err := cli.Put(context.Background(), fmt.Sprintf("%sflag-%03d", fsPrefix, i), "on"); err != nil {
			b.Fatal(err)
		}
	}
	return etcd, cli
}

// BenchmarkFailstaticGet compares reading the current config: failstatic's
// lock-free Get, a mutex-guarded map (the usual hand-rolled cache) and a direct
// etcd Get (linearizable, what a cache-less client does), in one run.
func BenchmarkFailstaticGet(b *testing.B) {
	_, cli := fsEtcd(b)
	c, err := failstatic.New(context.Background(), cli, fsConfig(""))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()

	key := fsPrefix + "flag-042"
	b.Run("failstatic.Get", func(b *testing.B) {
		b.ReportAllocs()
		var s failstatic.Snapshot[*fsConf]
		for b.Loop() {
			s = c.Get()
		}
		runtime.KeepAlive(s)
	})
	b.Run("failstatic.Get+lookup", func(b *testing.B) {
		b.ReportAllocs()
		var v string
		for b.Loop() {
			v = c.Get().Value.flags[key]
		}
		runtime.KeepAlive(v)
	})
	b.Run("failstatic.Get/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = c.Get()
			}
		})
	})
	b.Run("mutex-map", func(b *testing.B) {
		b.ReportAllocs()
		var mu sync.Mutex
		m := c.Get().Value.flags
		var v string
		for b.Loop() {
			mu.Lock()
			v = m[key]
			mu.Unlock()
		}
		runtime.KeepAlive(v)
	})
	b.Run("mutex-map/parallel", func(b *testing.B) {
		b.ReportAllocs()
		var mu sync.Mutex
		m := c.Get().Value.flags
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				mu.Lock()
				_ = m[key]
				mu.Unlock()
			}
		})
	})
	b.Run("etcd.Get", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cli.Get(context.Background(), key); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFailstaticPutToVisible measures an etcd Put until Get() returns the
// new revision (watch delivery, decode, validate, atomic swap), and reports p50
// and p99 in milliseconds, plus the p99 of the part after etcd acknowledged the
// Put (the part failstatic adds; the rest is etcd's commit and WAL fsync).
func BenchmarkFailstaticPutToVisible(b *testing.B) {
	_, cli := fsEtcd(b)
	cfg := fsConfig(filepath.Join(b.TempDir(), "state"))
	c, err := failstatic.New(context.Background(), cli, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var lat, afterAck []time.Duration
	i := 0
	for b.Loop() {
		start := time.Now()
		r, err := cli.Put(context.Background(), fsPrefix+"flag-042", fmt.Sprint(i))
		if err != nil {
			b.Fatal(err)
		}
		acked := time.Now()
		for c.Get().Revision < r.Header.Revision {
			runtime.Gosched()
		}
		lat = append(lat, time.Since(start))
		afterAck = append(afterAck, time.Since(acked))
		i++
	}
	reportPercentiles(b, lat)
	slices.Sort(afterAck)
	b.ReportMetric(float64(afterAck[min(len(afterAck)-1, len(afterAck)*99/100)])/float64(time.Millisecond), "ack-to-visible-p99-ms")
}

// BenchmarkFailstaticColdStart measures New when etcd is down (its connection
// blackholed) and a state file exists: the time until Get() serves the
// last-known-good snapshot from disk. "etcd-up" is the same New with etcd
// reachable, for comparison.
func BenchmarkFailstaticColdStart(b *testing.B) {
	etcd, cli := fsEtcd(b)
	cfg := fsConfig(filepath.Join(b.TempDir(), "state"))
	c, err := failstatic.New(context.Background(), cli, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Close(); err != nil {
		b.Fatal(err)
	}
	proxy := coordtest.NewProxy(b, strings.TrimPrefix(etcd.Endpoints[0], "http://"))
	proxy.Blackhole()
	down := coordtest.NewEtcdClient(b, proxy.URL())

	run := func(b *testing.B, client *clientv3.Client, cfg failstatic.Config[*fsConf], want failstatic.Source) {
		var lat []time.Duration
		for b.Loop() {
			start := time.Now()
			c, err := failstatic.New(context.Background(), client, cfg)
			if err != nil {
				b.Fatal(err)
			}
			if s := c.Get(); s.Source != want || len(s.Value.flags) != 100 {
				b.Fatalf("source %v with %d keys, want %v with 100", s.Source, len(s.Value.flags), want)
			}
			lat = append(lat, time.Since(start))
			b.StopTimer()
			c.Close()
			b.StartTimer()
		}
		reportPercentiles(b, lat)
	}
	b.Run("etcd-down/from-disk", func(b *testing.B) { run(b, down, cfg, failstatic.SourceDisk) })
	live := cfg
	live.StatePath = "" // wait for etcd (InitialTimeout) instead of falling back after 50 ms
	b.Run("etcd-up/live", func(b *testing.B) { run(b, cli, live, failstatic.SourceLive) })
	if proxy.Stats().DroppedBytes == 0 && proxy.Stats().Accepted == 0 {
		b.Fatal("the blackhole saw no traffic")
	}
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
