package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Outbox relay benchmarks: coordkit's relay against a raw FOR UPDATE SKIP LOCKED
// loop and watermill-sql's Forwarder, same PostgreSQL, no-op publishers. Each
// iteration drains a preloaded backlog; events/s is reported.
//
//	cd bench && go test -run '^$' -bench Outbox -benchtime 1x .
//
// OUTBOX_BENCH_EVENTS sets the backlog (default 50000), OUTBOX_BENCH_PAIRS the
// interleaved raw/relay pairs of the drain benchmark (default 3),
// OUTBOX_BENCH_ROUNDS the rounds of the sustained benchmark (default 6).

const outboxBatch = 500

func benchEvents() int {
	if n, err := strconv.Atoi(os.Getenv("OUTBOX_BENCH_EVENTS")); err == nil && n > 0 {
		return n
	}
	return 50000
}

// preload inserts n pending rows (1000 keys) straight into the outbox table.
func preload(b *testing.B, db *pgxpool.Pool, n int) {
	b.Helper()
	_, err := db.Exec(context.Background(), `INSERT INTO ob (id, aggregatetype, aggregateid, type, payload, payload_json)
SELECT gen_random_uuid(), 'bench', 'k' || (i % 1000), 'bench.event', '{"i":' || i || '}', true FROM generate_series(1, $1) i`, n)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(context.Background(), `VACUUM ANALYZE ob`); err != nil {
		b.Fatal(err)
	}
}

func newBenchOutbox(b *testing.B, db *pgxpool.Pool, cfg outbox.Config) *outbox.Outbox {
	cfg.Table = "ob"
	ob, err := outbox.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := ob.Migrate(context.Background(), db); err != nil {
		b.Fatal(err)
	}
	return ob
}

type noopPublisher struct{ n atomic.Int64 }

func (p *noopPublisher) Publish(_ context.Context, msgs []outbox.Message) []error {
	p.n.Add(int64(len(msgs)))
	return nil
}

// rawDrain is the textbook relay: claim a batch with FOR UPDATE SKIP LOCKED,
// "publish", mark (or delete), commit; workers loops run side by side (no
// per-key order across them).
func rawDrain(b *testing.B, db *pgxpool.Pool, del bool, workers int) (events, batches int) {
	var total, txs atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, t := rawDrainLoop(b, db, del)
			total.Add(int64(n))
			txs.Add(int64(t))
		}()
	}
	wg.Wait()
	return int(total.Load()), int(txs.Load())
}

// rawDrainLoop drains until a claim finds nothing; it returns the events it
// drained and its transactions (the last one empty).
func rawDrainLoop(b *testing.B, db *pgxpool.Pool, del bool) (total, txs int) {
	ctx := context.Background()
	mark := `UPDATE ob SET published_at = clock_timestamp() WHERE seq = ANY($1)`
	if del {
		mark = `DELETE FROM ob WHERE seq = ANY($1)`
	}
	for {
		var seqs []int64
		txs++
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT seq, id::text, aggregatetype, aggregateid, type, payload, headers::text FROM ob
WHERE published_at IS NULL ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED`, outboxBatch)
			if err != nil {
				return err
			}
			for rows.Next() {
				var seq int64
				var id, a, k, ty, p, h string
				if err := rows.Scan(&seq, &id, &a, &k, &ty, &p, &h); err != nil {
					return err
				}
				seqs = append(seqs, seq)
			}
			if err := rows.Err(); err != nil || len(seqs) == 0 {
				return err
			}
			_, err = tx.Exec(ctx, mark, seqs)
			return err
		})
		if err != nil {
			b.Error(err)
			return total, txs
		}
		if len(seqs) == 0 {
			return total, txs
		}
		total += len(seqs)
	}
}

// benchPool is a pool on db's schema with room for several relays (each holds
// a LISTEN connection beside its batches) and producers, counting its round
// trips.
func benchPool(b *testing.B, db *coordtest.PostgresDB, maxConns int) (*pgxpool.Pool, *coordtest.RoundTrips) {
	b.Helper()
	return countedPool(b, db, int32(maxConns))
}

// runRelaysUntil runs relays relays until published() reaches want; it returns
// the sum of their stats.
func runRelaysUntil(b *testing.B, ob *outbox.Outbox, db *pgxpool.Pool, pub outbox.Publisher, relays int, want int64, published func() int64) outbox.RelayStats {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var rs []*outbox.Relay
	for range relays {
		r, err := ob.NewRelay(db, pub)
		if err != nil {
			b.Fatal(err)
		}
		rs = append(rs, r)
		wg.Add(1)
		go func() { defer wg.Done(); r.Run(ctx) }()
	}
	for published() < want {
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	var sum outbox.RelayStats
	for _, r := range rs {
		s := r.Stats()
		sum.Batches += s.Batches
		sum.Solo += s.Solo
	}
	return sum
}

// orderChecker is a no-op publisher that checks per-key order on the preloaded
// backlog (event i has key i mod 1000, so a key's previous event is seq−1000):
// an event handed over before its key's previous event ever was is a violation.
type orderChecker struct {
	mu         sync.Mutex
	base       int64 // lowest seq of the backlog
	seen       []bool
	n          atomic.Int64 // first deliveries
	violations atomic.Int64
}

func newOrderChecker(b *testing.B, db *pgxpool.Pool, n int) *orderChecker {
	c := &orderChecker{seen: make([]bool, n)}
	if err := db.QueryRow(context.Background(), `SELECT min(seq) FROM ob`).Scan(&c.base); err != nil {
		b.Fatal(err)
	}
	return c
}

func (c *orderChecker) Publish(_ context.Context, msgs []outbox.Message) []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		i := m.Seq - c.base
		if c.seen[i] {
			continue // a duplicate: allowed (at least once)
		}
		if i >= 1000 && !c.seen[i-1000] {
			c.violations.Add(1)
		}
		c.seen[i] = true
		c.n.Add(1)
	}
	return nil
}

// BenchmarkOutboxDrain: per mode (mark, delete) and parallelism (1 and 4), the
// raw loop and the relay drain the same backlog, interleaved pair by pair
// (OUTBOX_BENCH_PAIRS, default 3; which one goes first alternates), so both see
// the same machine load; it reports the medians and the median of the pairs'
// ratios. The relays' publisher checks per-key order on every hand-over.
func BenchmarkOutboxDrain(b *testing.B) {
	n := benchEvents()
	pairs := 3
	if p, err := strconv.Atoi(os.Getenv("OUTBOX_BENCH_PAIRS")); err == nil && p > 0 {
		pairs = p
	}
	for _, mode := range []string{"mark", "delete"} {
		del := mode == "delete"
		for _, par := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s-%d", mode, par), func(b *testing.B) {
				var raw, relay, ratio, rawRT, relayRT, solo []float64
				for i := range pairs * b.N {
					var r, c drained
					if i%2 == 0 {
						r, c = drainRaw(b, n, del, par), drainRelay(b, n, del, par)
					} else {
						c, r = drainRelay(b, n, del, par), drainRaw(b, n, del, par)
					}
					raw, relay, ratio = append(raw, r.rate), append(relay, c.rate), append(ratio, c.rate/r.rate)
					rawRT, relayRT, solo = append(rawRT, r.rt), append(relayRT, c.rt), append(solo, c.solo)
					b.Logf("pair %d: raw %.0f, relay %.0f events/s: %.2f× (round trips per transaction: raw %.2f, relay %.2f; relay batches solo: %.0f %%)",
						i+1, r.rate, c.rate, c.rate/r.rate, r.rt, c.rt, 100*c.solo)
				}
				b.ReportMetric(median(raw), "raw-events/s")
				b.ReportMetric(median(relay), "relay-events/s")
				b.ReportMetric(median(ratio), "relay/raw")
				b.ReportMetric(median(rawRT), "raw-rt/tx")
				b.ReportMetric(median(relayRT), "relay-rt/tx")
				b.ReportMetric(median(solo), "relay-solo-share")
			})
		}
	}
	b.Run("watermill-forwarder-defaults", func(b *testing.B) { benchWatermill(b, n, 0) })
	b.Run("watermill-forwarder-batch500", func(b *testing.B) { benchWatermill(b, n, outboxBatch) })
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// drained is one drain's throughput, its round trips per transaction, and (for
// relays) the share of its batches claimed solo.
type drained struct{ rate, rt, solo float64 }

// drainRaw drains a fresh backlog of n events with workers raw loops.
func drainRaw(b *testing.B, n int, del bool, workers int) drained {
	db := coordtest.Postgres(b)
	pool, rt := benchPool(b, db, 2*workers+2)
	newBenchOutbox(b, pool, outbox.Config{})
	preload(b, pool, n)
	rt0 := rt.Count()
	start := time.Now()
	got, txs := rawDrain(b, pool, del, workers)
	if got != n {
		b.Fatalf("drained %d of %d", got, n)
	}
	return drained{rate: float64(n) / time.Since(start).Seconds(), rt: float64(rt.Count()-rt0) / float64(txs)}
}

// drainRelay drains a fresh backlog of n events with relays relays, checking
// per-key order. Its round trips per transaction count every round trip the
// relays made (LISTEN, gauges, empty claims) against the batches that claimed.
func drainRelay(b *testing.B, n int, del bool, relays int) drained {
	db := coordtest.Postgres(b)
	pool, rt := benchPool(b, db, 2*relays+2)
	ob := newBenchOutbox(b, pool, outbox.Config{BatchSize: outboxBatch, DeleteOnPublish: del, PruneInterval: time.Hour})
	preload(b, pool, n)
	pub := newOrderChecker(b, pool, n)
	rt0 := rt.Count()
	start := time.Now()
	stats := runRelaysUntil(b, ob, pool, pub, relays, int64(n), pub.n.Load)
	rate := float64(n) / time.Since(start).Seconds()
	trips := rt.Count() - rt0
	var left int
	pool.QueryRow(context.Background(), `SELECT count(*) FROM ob WHERE published_at IS NULL`).Scan(&left)
	if left != 0 {
		b.Fatalf("%d left", left)
	}
	if v := pub.violations.Load(); v != 0 {
		b.Fatalf("%d events handed over before their key's previous event", v)
	}
	return drained{rate: rate, rt: float64(trips) / float64(stats.Batches), solo: float64(stats.Solo) / float64(stats.Batches)}
}

type countingWatermillPublisher struct{ n atomic.Int64 }

func (p *countingWatermillPublisher) Publish(_ string, msgs ...*message.Message) error {
	p.n.Add(int64(len(msgs)))
	return nil
}
func (p *countingWatermillPublisher) Close() error { return nil }

func benchWatermill(b *testing.B, n, batch int) {
	ctx := context.Background()
	var elapsed time.Duration
	for range b.N {
		db := coordtest.Postgres(b)
		beg := wsql.BeginnerFromPgx(db.Pool)
		schema := wsql.DefaultPostgreSQLSchema{SubscribeBatchSize: batch}
		sqlPub, err := wsql.NewPublisher(beg, wsql.PublisherConfig{SchemaAdapter: schema, AutoInitializeSchema: true}, watermill.NopLogger{})
		if err != nil {
			b.Fatal(err)
		}
		fpub := forwarder.NewPublisher(sqlPub, forwarder.PublisherConfig{})
		for i := 0; i < n; i += 1000 {
			msgs := make([]*message.Message, 0, 1000)
			for j := i; j < min(n, i+1000); j++ {
				msgs = append(msgs, message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprintf(`{"i":%d}`, j))))
			}
			if err := fpub.Publish("out", msgs...); err != nil {
				b.Fatal(err)
			}
		}
		sub, err := wsql.NewSubscriber(beg, wsql.SubscriberConfig{SchemaAdapter: schema,
			OffsetsAdapter: wsql.DefaultPostgreSQLOffsetsAdapter{}, InitializeSchema: true}, watermill.NopLogger{})
		if err != nil {
			b.Fatal(err)
		}
		out := &countingWatermillPublisher{}
		fwd, err := forwarder.NewForwarder(sub, out, watermill.NopLogger{}, forwarder.Config{})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		go fwd.Run(ctx)
		for out.n.Load() < int64(n) {
			time.Sleep(2 * time.Millisecond)
		}
		elapsed += time.Since(start)
		fwd.Close()
		sub.Close()
	}
	b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "events/s")
}

// BenchmarkOutboxSustained: one relay (mark mode, pruning every second) drains
// rounds of preloaded events; throughput of the last round ÷ the first shows the
// cost of table growth, bloat and pruning.
func BenchmarkOutboxSustained(b *testing.B) {
	n := benchEvents()
	rounds := 6
	if r, err := strconv.Atoi(os.Getenv("OUTBOX_BENCH_ROUNDS")); err == nil && r > 0 {
		rounds = r
	}
	for range b.N {
		db := coordtest.Postgres(b)
		ob := newBenchOutbox(b, db.Pool, outbox.Config{BatchSize: outboxBatch, Retention: time.Millisecond, PruneInterval: time.Second})
		pub := &noopPublisher{}
		r, _ := ob.NewRelay(db.Pool, pub)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { r.Run(ctx); close(done) }()
		var first, last float64
		for round := range rounds {
			preloadNoVacuum(b, db.Pool, n)
			start := time.Now()
			for pub.n.Load() < int64((round+1)*n) {
				time.Sleep(2 * time.Millisecond)
			}
			rate := float64(n) / time.Since(start).Seconds()
			b.Logf("round %d: %.0f events/s", round+1, rate)
			if round == 0 {
				first = rate
			}
			last = rate
		}
		cancel()
		<-done
		b.ReportMetric(first, "first-events/s")
		b.ReportMetric(last, "last-events/s")
		b.ReportMetric(last/first, "last/first")
		b.ReportMetric(float64(rounds*n), "total-events")
	}
}

func preloadNoVacuum(b *testing.B, db *pgxpool.Pool, n int) {
	_, err := db.Exec(context.Background(), `INSERT INTO ob (id, aggregatetype, aggregateid, type, payload, payload_json)
SELECT gen_random_uuid(), 'bench', 'k' || (i % 1000), 'bench.event', '{"i":' || i || '}', true FROM generate_series(1, $1) i`, n)
	if err != nil {
		b.Fatal(err)
	}
}
