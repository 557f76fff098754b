package watchplane_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/internal/watchplane"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// The plane is internal: bench/ (another module's users' view) drives it only
// through failstatic or membership, whose own work would hide the plane's. Its
// benchmarks are here, on its own API, reported in docs/benchmarks.md.

// BenchmarkDelivery measures event delivery latency through the plane against a
// direct clientv3 watch, in the same run and on the same events: each iteration
// puts one key and records, from the Put's start, when the last of k direct
// watches of the prefix and the last of k plane subscriptions of it (one root,
// one upstream watch) received the event. Each side has a client of its own.
// Reported: p50 and p99 of each side and the ratio of their p50 (plane ÷
// direct; target ≤ 1.1). With stalled "plane" or "direct", the first watcher
// of that side never reads (a stuck consumer): the others' latency is measured
// beside it. The heap the run leaves behind (after GC) is reported for each
// variant (the plane's history holds recent events in every one) — the
// plane drops a stuck subscriber's queue past Config.Buffer events and tells it
// to resync; a clientv3 watch keeps buffering for its reader.
func BenchmarkDelivery(b *testing.B) {
	for _, c := range []struct {
		k       int
		stalled string
	}{{1, ""}, {100, ""}, {100, "plane"}, {100, "direct"}} {
		name := fmt.Sprintf("subscribers=%d", c.k)
		if c.stalled != "" {
			name += "/stalled=" + c.stalled
		}
		b.Run(name, func(b *testing.B) { benchDelivery(b, c.k, c.stalled) })
	}
}

func benchDelivery(b *testing.B, k int, stalled string) {
	e := coordtest.Etcd(b)
	writer, dcli, pcli := e.Client(b), e.Client(b), e.Client(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const prefix = "/tenants/bench/config/"
	if _, err := writer.Put(ctx, prefix+"k", "0"); err != nil {
		b.Fatal(err)
	}
	p := watchplane.New(pcli, watchplane.Config{Logger: quiet})
	defer p.Close()

	// got[side][i] receives the arrival time of the current event at watcher i.
	type arrival struct{ at time.Time }
	direct := make([]chan arrival, k)
	plane := make([]chan arrival, k)
	for i := range k {
		direct[i], plane[i] = make(chan arrival, 1), make(chan arrival, 1)
		wch := dcli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
		<-wch
		s, err := p.Subscribe(watchplane.Spec{Key: prefix, Prefix: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Next(ctx); err != nil { // the initial resync
			b.Fatal(err)
		}
		if stalled != "direct" || i > 0 {
			go func(out chan arrival) {
				for wr := range wch {
					if len(wr.Events) > 0 {
						out <- arrival{time.Now()}
					}
				}
			}(direct[i])
		}
		if stalled == "plane" && i == 0 {
			continue
		}
		go func(out chan arrival) {
			for {
				u, err := s.Next(ctx)
				if err != nil {
					return
				}
				if len(u.Events) > 0 {
					out <- arrival{time.Now()}
				}
			}
		}(plane[i])
	}
	last := func(chs []chan arrival) time.Time {
		var t time.Time
		for _, ch := range chs {
			if a := <-ch; a.at.After(t) {
				t = a.at
			}
		}
		return t
	}
	switch stalled {
	case "direct":
		direct = direct[1:]
	case "plane":
		plane = plane[1:]
	}
	var dl, pl []time.Duration
	heap0 := heapAlloc()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := writer.Put(ctx, prefix+"k", fmt.Sprint(i)); err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		var d, q time.Time
		wg.Go(func() { d = last(direct) })
		wg.Go(func() { q = last(plane) })
		wg.Wait()
		dl, pl = append(dl, d.Sub(start)), append(pl, q.Sub(start))
	}
	b.StopTimer()
	b.ReportMetric(float64(int64(heapAlloc())-int64(heap0))/1024, "heap-growth-KiB")
	dp50, dp99 := pct(dl, 0.5), pct(dl, 0.99)
	pp50, pp99 := pct(pl, 0.5), pct(pl, 0.99)
	b.ReportMetric(float64(dp50.Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(dp99.Microseconds()), "direct-p99-µs")
	b.ReportMetric(float64(pp50.Microseconds()), "plane-p50-µs")
	b.ReportMetric(float64(pp99.Microseconds()), "plane-p99-µs")
	b.ReportMetric(float64(pp50)/float64(dp50), "plane/direct-p50")
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func pct(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(int(q*float64(len(s))), len(s)-1)]
}

// BenchmarkMemoryPerSubscriber measures the heap a subscription holds: 10,000
// exact-key subscriptions on one root of the plane, against 10,000 clientv3
// watches of the same keys on one client (client side only: each of those is
// also a watcher on the server, the plane's are one). Run with -benchtime 1x.
func BenchmarkMemoryPerSubscriber(b *testing.B) {
	const n = 10000
	e := coordtest.Etcd(b)
	const prefix = "/tenants/bench/members/"
	heap := heapAlloc
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		pcli := e.Client(b)
		p := watchplane.New(pcli, watchplane.Config{Logger: quiet})
		s0, err := p.Subscribe(watchplane.Spec{Key: prefix, Prefix: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s0.Next(ctx); err != nil {
			b.Fatal(err)
		}
		before := heap()
		subs := make([]*watchplane.Sub, 0, n)
		for j := range n {
			s, err := p.Subscribe(watchplane.Spec{Key: fmt.Sprintf("%si%05d", prefix, j)})
			if err != nil {
				b.Fatal(err)
			}
			subs = append(subs, s)
		}
		planeBytes := float64(heap()-before) / n
		runtime.KeepAlive(subs)
		p.Close()

		dcli := e.Client(b)
		before = heap()
		chans := make([]clientv3.WatchChan, 0, n)
		for j := range n {
			chans = append(chans, dcli.Watch(ctx, fmt.Sprintf("%si%05d", prefix, j), clientv3.WithCreatedNotify()))
		}
		<-chans[n-1] // the last one created: every one is registered
		directBytes := float64(heap()-before) / n
		runtime.KeepAlive(chans)
		cancel()
		b.ReportMetric(planeBytes, "plane-B/sub")
		b.ReportMetric(directBytes, "direct-B/watch")
	}
}
