package pgfence_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func tok(t testing.TB, s string) coord.Token {
	t.Helper()
	k, err := coord.ParseToken(s)
	if err != nil {
		t.Fatalf("ParseToken(%q): %v", s, err)
	}
	return k
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newFence migrates a fence in a fresh schema and returns it with a manual metric
// reader that sees its counter.
func newFence(t testing.TB, cfg pgfence.Config) (*pgfence.Fence, *coordtest.PostgresDB, *sdkmetric.ManualReader) {
	t.Helper()
	db := coordtest.Postgres(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	cfg.MeterProvider = mp
	f, err := pgfence.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := f.Migrate(testCtx(t), db.Pool); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return f, db, reader
}

// rejections returns coordkit.pgfence.rejected per lease attribute.
func rejections(t testing.TB, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "coordkit.pgfence.rejected" {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				t.Fatalf("%s is %T, want a Sum[int64]", m.Name, m.Data)
			}
			for _, dp := range sum.DataPoints {
				v, _ := dp.Attributes.Value(coord.AttrLease)
				out[v.AsString()] += dp.Value
			}
		}
	}
	return out
}

// insertInto returns fenced work for Exec that inserts v into table, a table of
// one text column.
func insertInto(table, v string) func(context.Context, pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES ($1)", v)
		return err
	}
}

// quietLogger discards everything: for components whose warnings are the test's
// expected outcome.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
