package quotakv_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/coord/quotakv"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestQuotasBeforeEtcd(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	clock := coordtest.NewFakeClock(time.Unix(0, 0))
	reader := sdkmetric.NewManualReader()
	kv := quotakv.New(cli, coord.NewQuotas(coord.QuotaConfig{Clock: clock}),
		quotakv.Config{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	key := "/tenants/acme/config/big"

	if _, err := kv.Put(ctx, key, strings.Repeat("x", coord.DefaultMaxValueBytes)); err != nil {
		t.Fatalf("64 KiB put: %v", err)
	}
	_, err := kv.Put(ctx, key, strings.Repeat("y", coord.DefaultMaxValueBytes+1))
	if !errors.Is(err, coord.ErrQuotaExceeded) {
		t.Fatalf("64 KiB + 1: %v", err)
	}
	// The refused value never reached etcd.
	resp, err := cli.Get(ctx, key)
	if err != nil || resp.Kvs[0].Value[0] != 'x' {
		t.Fatalf("etcd holds the refused value (%v)", err)
	}
	// A transaction hiding an oversized put is refused too.
	_, err = kv.Txn(ctx).If().Then(clientv3.OpPut(key, strings.Repeat("z", coord.DefaultMaxValueBytes+1))).Commit()
	if !errors.Is(err, coord.ErrQuotaExceeded) {
		t.Fatalf("txn: %v", err)
	}
	// Rate: the burst is 200 writes; the 200th write above (1 already done) passes and
	// the next is refused without reaching etcd.
	var refused int
	for i := 0; i < 250; i++ {
		if _, err := kv.Put(ctx, "/tenants/acme/config/n", "v"); errors.Is(err, coord.ErrQuotaExceeded) {
			refused++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if refused != 51 {
		t.Fatalf("refused %d of 250 writes, want 51", refused)
	}
	before, _ := cli.Get(ctx, "/tenants/acme/config/n")
	if before.Kvs[0].Version != 199 {
		t.Fatalf("etcd saw %d writes", before.Kvs[0].Version)
	}
	// Another tenant is not throttled by acme, and keys outside the layout are refused.
	if _, err := kv.Put(ctx, "/tenants/other/config/n", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "/no-tenant", "v"); !errors.Is(err, coord.ErrInvalidName) {
		t.Fatalf("outside layout: %v", err)
	}
	// Every refusal was counted: 1 oversized put, 1 oversized txn, 51 over rate.
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	var counted int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "coordkit.quotakv.rejected" {
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					counted += dp.Value
				}
			}
		}
	}
	if counted != 53 {
		t.Fatalf("%s counted %d refusals, want 53", "coordkit.quotakv.rejected", counted)
	}
	// Reads are never charged.
	for i := 0; i < 300; i++ {
		if _, err := kv.Get(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
}
