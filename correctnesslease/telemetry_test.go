package correctnesslease

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestTelemetry: acquisitions, step-downs by reason, renew latency, time as
// holder, keepalive calls and the Acquire span, through a real OTel SDK.
func TestTelemetry(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = mp.Shutdown(ctx); _ = tp.Shutdown(ctx) }()

	failing := make(chan struct{})
	ka := func(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
		select {
		case <-failing:
			return nil, errors.New("injected: unreachable")
		default:
			return cli.KeepAliveOnce(ctx, id)
		}
	}
	s := newSession(t, cli, Config{Tenant: coordtest.Tenant(t), TTL: testTTL, MeterProvider: mp, TracerProvider: tp, keepAliveOnce: ka})
	l := mustAcquire(ctx, t, s, "metered")
	time.Sleep(testTTL / 2) // at least one successful keepalive
	close(failing)
	coordtest.Recv(t, s.Done(), testTTL, "step-down") // closed after every lease recorded its loss
	if lossReason(l.Err()) != coord.LossRenewalDeadline {
		t.Fatalf("lease: %v", l.Err())
	}

	sums := map[string]int64{}
	hists := map[string]int64{}
	var stepReason string
	for _, p := range metricPoints(t, reader) {
		if p.hist {
			hists[p.name] += p.n
			continue
		}
		sums[p.name] += p.n
		if p.name == "coordkit.correctnesslease.step_downs" {
			v, _ := p.attrs.Value(attribute.Key(coord.AttrReason))
			stepReason = v.AsString()
		}
	}
	if sums["coordkit.correctnesslease.acquisitions"] != 1 || sums["coordkit.correctnesslease.step_downs"] != 1 ||
		stepReason != string(coord.LossRenewalDeadline) || sums["coordkit.correctnesslease.keepalives"] < 2 ||
		hists["coordkit.correctnesslease.renewal.duration"] < 1 || hists["coordkit.correctnesslease.hold.duration"] != 1 {
		t.Fatalf("metrics: sums %v, histograms %v, step-down reason %q", sums, hists, stepReason)
	}
	names := map[string]bool{}
	for _, sp := range spans.Ended() {
		names[sp.Name()] = true
	}
	if !names["correctnesslease.NewSession"] || !names["correctnesslease.Acquire"] {
		t.Fatalf("spans: %v", names)
	}
}
