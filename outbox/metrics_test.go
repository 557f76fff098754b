package outbox_test

import (
	"context"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// testMeter records counter sums and histogram observations by instrument name,
// and keeps the observable gauges' callbacks so a test can read them.
type testMeter struct {
	noop.MeterProvider
	mu        sync.Mutex
	sums      map[string]float64
	hist      map[string][]float64
	callbacks map[string]metric.Float64Callback
}

func newTestMeter() *testMeter {
	return &testMeter{sums: map[string]float64{}, hist: map[string][]float64{}, callbacks: map[string]metric.Float64Callback{}}
}

func (p *testMeter) Meter(string, ...metric.MeterOption) metric.Meter { return &tMeter{p: p} }

func (p *testMeter) sum(name string) float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sums[name]
}

func (p *testMeter) observations(name string) []float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]float64(nil), p.hist[name]...)
}

func (p *testMeter) gauge(t *testing.T, name string) float64 {
	p.mu.Lock()
	cb := p.callbacks[name]
	p.mu.Unlock()
	if cb == nil {
		t.Fatalf("no gauge %s", name)
	}
	var o gaugeObs
	cb(context.Background(), &o)
	return o.v
}

type gaugeObs struct {
	metric.Float64Observer
	v float64
}

func (o *gaugeObs) Observe(v float64, _ ...metric.ObserveOption) { o.v = v }

type tMeter struct {
	noop.Meter
	p *testMeter
}

type tCounter struct {
	noop.Int64Counter
	p    *testMeter
	name string
}

func (c tCounter) Add(_ context.Context, v int64, _ ...metric.AddOption) {
	c.p.mu.Lock()
	c.p.sums[c.name] += float64(v)
	c.p.mu.Unlock()
}

type tHist struct {
	noop.Float64Histogram
	p    *testMeter
	name string
}

func (h tHist) Record(_ context.Context, v float64, _ ...metric.RecordOption) {
	h.p.mu.Lock()
	h.p.hist[h.name] = append(h.p.hist[h.name], v)
	h.p.mu.Unlock()
}

func (m *tMeter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return tCounter{p: m.p, name: name}, nil
}

func (m *tMeter) Float64Histogram(name string, _ ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return tHist{p: m.p, name: name}, nil
}

func (m *tMeter) Float64ObservableGauge(name string, opts ...metric.Float64ObservableGaugeOption) (metric.Float64ObservableGauge, error) {
	cfg := metric.NewFloat64ObservableGaugeConfig(opts...)
	m.p.mu.Lock()
	if cbs := cfg.Callbacks(); len(cbs) > 0 {
		m.p.callbacks[name] = cbs[0]
	}
	m.p.mu.Unlock()
	return noop.Float64ObservableGauge{}, nil
}
