package natsjs_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/outbox/natsjs"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func randomName() string {
	b := make([]byte, 5)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// jetStream connects to the local nats-server and creates a stream capturing
// prefix.> with the given duplicate window; both are removed when the test ends.
func jetStream(t *testing.T, dupWindow time.Duration) (url string, js jetstream.JetStream, stream, prefix string) {
	t.Helper()
	url = coordtest.NATSURL(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("nats connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err = jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	name := randomName()
	stream, prefix = "OUTBOX_"+name, "outbox"+name
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".>"},
		Duplicates: dupWindow, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatalf("create stream (is JetStream enabled? nats-server -js): %v", err)
	}
	t.Cleanup(func() { js.DeleteStream(context.Background(), stream) })
	return url, js, stream, prefix
}

// countingMeter is an OTel SDK meter provider whose counters a test reads by name.
type countingMeter struct {
	*sdkmetric.MeterProvider
	reader *sdkmetric.ManualReader
}

func newCountingMeter() *countingMeter {
	r := sdkmetric.NewManualReader()
	return &countingMeter{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)), reader: r}
}

// sum returns the total of the int64 counter name over all its attributes.
func (m *countingMeter) sum(name string) float64 {
	var rm metricdata.ResourceMetrics
	if err := m.reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if s, ok := mt.Data.(metricdata.Sum[int64]); ok && mt.Name == name {
				for _, dp := range s.DataPoints {
					total += dp.Value
				}
			}
		}
	}
	return float64(total)
}

// outboxAndInbox is an outbox of cfg and an inbox of icfg, their tables
// migrated in db.
func outboxAndInbox(t *testing.T, db *pgxpool.Pool, cfg outbox.Config, icfg outbox.InboxConfig) (*outbox.Outbox, *outbox.Inbox) {
	t.Helper()
	ob, err := outbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	in, err := outbox.NewInbox(icfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return ob, in
}

// newPublisher is natsjs.New, failing the test on its error.
func newPublisher(t testing.TB, js jetstream.JetStream, cfg natsjs.Config) *natsjs.Publisher {
	t.Helper()
	p, err := natsjs.New(js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
