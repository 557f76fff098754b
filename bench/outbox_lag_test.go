package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// BenchmarkOutboxLag offers events for 10 s — each its own BEGIN; EnqueueTx;
// COMMIT, from producers each paced by a ticker — to relays with default
// settings, and reports the created → handed to the publisher lag and the commit
// acknowledged → handed to the publisher lag (which excludes the producer's own
// commit): 1,000 events/s to one relay, 5,000 events/s to 4 relays. The producers
// run in a process of their own (this test binary, re-executed with
// outboxProducerEnv), so the relays' process does not slow them down and the
// offered rate is what the machine lets them commit; offered-events/s says what
// it was. OUTBOX_LAG_TRACE=1 logs the worst commit → publish lag per 250 ms.
func BenchmarkOutboxLag(b *testing.B) {
	b.Run("1relay-1000/s", func(b *testing.B) { benchLag(b, 1, 50, 1000) })
	b.Run("4relays-5000/s", func(b *testing.B) { benchLag(b, 4, 50, 5000) })
}

// outboxProducerEnv carries "url|channel|producers|perSecond|seconds" to the
// producer child, which prints one "<event id> <commit acknowledged, Unix ns>"
// line per committed event and exits.
const outboxProducerEnv = "COORDKIT_BENCH_OUTBOX_PRODUCER"

func benchLag(b *testing.B, relays, producers, perSecond int) {
	const seconds = 10
	for range b.N {
		db := coordtest.Postgres(b)
		pool, _ := benchPool(b, db, 3*relays+2)
		channel := db.Schema + "_ready" // channels are per database: not another run's
		ob := newBenchOutbox(b, pool, outbox.Config{Channel: channel})
		var mu sync.Mutex
		var lags []float64
		pubAt := map[outbox.ID]time.Time{} // handed to the publisher
		pub := outbox.PublisherFunc(func(_ context.Context, m outbox.Message) error {
			now := time.Now()
			mu.Lock()
			pubAt[m.ID] = now
			lags = append(lags, float64(now.Sub(m.CreatedAt).Microseconds())/1000)
			mu.Unlock()
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		var rwg sync.WaitGroup
		for range relays {
			r, _ := ob.NewRelay(pool, pub)
			rwg.Add(1)
			go func() { defer rwg.Done(); r.Run(ctx) }()
		}
		time.Sleep(200 * time.Millisecond) // the relays' LISTEN and first pass

		cmd, out := startChild(b, fmt.Sprintf("%s=%s|%s|%d|%d|%d", outboxProducerEnv, db.URL, channel, producers, perSecond, seconds))
		committedAt := map[outbox.ID]time.Time{}
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 2 {
				continue
			}
			id, err1 := outbox.ParseID(f[0])
			ns, err2 := strconv.ParseInt(f[1], 10, 64)
			if err1 != nil || err2 != nil {
				b.Fatalf("producer child: bad line %q", sc.Text())
			}
			committedAt[id] = time.Unix(0, ns)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatalf("producer child: %v", err)
		}
		sent := len(committedAt)
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			got := len(pubAt)
			mu.Unlock()
			if got >= sent {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d events handed to the publisher after 30 s", got, sent)
			}
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		rwg.Wait()
		slices.Sort(lags)
		var fromCommit []float64
		for id, c := range committedAt {
			if p, ok := pubAt[id]; ok {
				fromCommit = append(fromCommit, max(0, float64(p.Sub(c).Microseconds())/1000))
			}
		}
		if os.Getenv("OUTBOX_LAG_TRACE") != "" {
			logLagWindows(b, committedAt, pubAt)
		}
		slices.Sort(fromCommit)
		b.ReportMetric(fromCommit[len(fromCommit)*99/100], "p99-commit-to-publish-ms")
		b.ReportMetric(float64(sent)/seconds, "offered-events/s")
		b.ReportMetric(lags[len(lags)/2], "p50-lag-ms")
		b.ReportMetric(lags[len(lags)*99/100], "p99-lag-ms")
		b.ReportMetric(lags[len(lags)-1], "max-lag-ms")
	}
}

// outboxProducerChild runs the producers spec describes: each commits one
// EnqueueTx per period (producers / perSecond), event i due at i periods from the
// start, for the given seconds, and reports each committed event on stdout.
func outboxProducerChild(spec string) error {
	parts := strings.Split(spec, "|")
	if len(parts) != 5 {
		return fmt.Errorf("spec %q", spec)
	}
	url, channel := parts[0], parts[1]
	producers, _ := strconv.Atoi(parts[2])
	perSecond, _ := strconv.Atoi(parts[3])
	seconds, _ := strconv.Atoi(parts[4])
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.MaxConns = int32(producers) + 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	ob, err := outbox.New(outbox.Config{Table: "ob", Channel: channel})
	if err != nil {
		return err
	}
	lines := make(chan string, 4096)
	written := make(chan error, 1)
	go func() {
		w := bufio.NewWriter(os.Stdout)
		for l := range lines {
			io.WriteString(w, l)
		}
		written <- w.Flush()
	}()
	var wg sync.WaitGroup
	var failed atomic.Value
	start := time.Now()
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Event i is due i periods after the producer's start (staggered
			// across the period): a producer whose commit took longer catches up
			// at once instead of dropping ticks, so the offered rate is the aimed
			// one unless the machine cannot commit that fast in the window.
			period := time.Second * time.Duration(producers) / time.Duration(perSecond)
			end := start.Add(time.Duration(seconds) * time.Second)
			for i := 0; ; i++ {
				due := start.Add(time.Duration(i)*period + period*time.Duration(p)/time.Duration(producers)) // staggered
				if !due.Before(end) || !time.Now().Before(end) {
					return // the window is over: what was not offered in it was not offered
				}
				time.Sleep(time.Until(due))
				var id outbox.ID
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					var err error
					id, err = ob.EnqueueTx(ctx, tx, outbox.Event{Topic: "bench", Key: fmt.Sprintf("p%dk%d", p, i%50), Type: "t", Payload: []byte(`{}`), JSON: true})
					return err
				})
				if err != nil {
					failed.Store(err)
					return
				}
				lines <- id.String() + " " + strconv.FormatInt(time.Now().UnixNano(), 10) + "\n"
			}
		}()
	}
	wg.Wait()
	close(lines)
	if err := <-written; err != nil {
		return err
	}
	if err, ok := failed.Load().(error); ok {
		return err
	}
	return nil
}

// logLagWindows logs, per 250 ms of commits, the worst commit → publish lag
// above 20 ms: where the tail of the distribution comes from (OUTBOX_LAG_TRACE=1).
func logLagWindows(b *testing.B, committedAt, pubAt map[outbox.ID]time.Time) {
	var t0 time.Time
	for _, c := range committedAt {
		if t0.IsZero() || c.Before(t0) {
			t0 = c
		}
	}
	worst := map[int64]float64{}
	for id, c := range committedAt {
		if p, ok := pubAt[id]; ok {
			w := c.Sub(t0).Milliseconds() / 250
			worst[w] = max(worst[w], float64(p.Sub(c).Microseconds())/1000)
		}
	}
	ws := slices.Sorted(maps.Keys(worst))
	for _, w := range ws {
		if worst[w] > 20 {
			b.Logf("commits at %5d ms: worst commit → publish %.1f ms", w*250, worst[w])
		}
	}
}
