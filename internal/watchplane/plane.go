package watchplane

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"

	"github.com/coordkit/coordkit/coord"
)

// Plane is one process's watch machinery over one etcd client: one upstream
// watch per root prefix, shared by every Sub under it. Safe for concurrent use.
type Plane struct {
	cli    *clientv3.Client
	cfg    Config
	in     *instruments
	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	stream context.Context // the watches' and progress requests' context: one gRPC stream
	wg     sync.WaitGroup  // every root's loop and the maintain loop
	wake   chan struct{}   // cap 1: probe now (a Sync waits, or a requirement changed)
	stopAF func() bool     // the AfterFunc closing the plane with its client
	forget func()          // removes a shared plane from the registry

	opens, relists, resyncs atomic.Int64  // totals, for Stats
	cluster                 atomic.Uint64 // the etcd cluster's ID, from its first answer
	slowProbes              int           // consecutive probe reads that ran out of time (the maintain loop's own)

	mu      sync.Mutex
	roots   map[string]*root
	closed  bool
	syncing int // Sync calls waiting: the maintain loop probes at once
}

// The shared planes, one per (client, clock): sharing is the default for
// everything a process does on one *clientv3.Client. An entry ends with its
// client (the plane closes when the client's context ends), so no state outlives
// the client; this is the one package-level state of the SDK.
var (
	registryMu sync.Mutex
	registry   = map[registryKey]*Plane{}
)

type registryKey struct {
	cli   *clientv3.Client
	clock coord.Clock
}

// For returns the shared plane of cli and clock (nil: the system clock),
// creating it on first use. It ends when cli is closed. A clock whose type is
// not comparable cannot key the registry: it gets a plane of its own, also ended
// with cli. It does not block.
func For(cli *clientv3.Client, clock coord.Clock) *Plane {
	clock = coord.OrSystem(clock)
	if !reflect.TypeOf(clock).Comparable() {
		return New(cli, Config{Clock: clock})
	}
	k := registryKey{cli, clock}
	registryMu.Lock()
	defer registryMu.Unlock()
	if p := registry[k]; p != nil {
		return p
	}
	p := New(cli, Config{Clock: clock})
	registry[k] = p
	p.forget = func() {
		registryMu.Lock()
		defer registryMu.Unlock()
		if registry[k] == p {
			delete(registry, k)
		}
	}
	return p
}

// New returns a private plane of cli. It does no I/O; roots start with their
// first subscriber. It closes when cli is closed, or at Close.
func New(cli *clientv3.Client, cfg Config) *Plane {
	cfg = cfg.withDefaults()
	p := &Plane{cli: cli, cfg: cfg, wake: make(chan struct{}, 1), roots: map[string]*root{}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	// A stream of our own (clientv3 shares one gRPC stream per distinct
	// metadata): progress requests reach only the plane's watches.
	p.stream = metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(p.ctx), "coordkit-watchplane", "1")
	p.in = newInstruments(cfg.MeterProvider, p.observe)
	p.wg.Add(1)
	go p.maintain()
	p.stopAF = context.AfterFunc(cli.Ctx(), p.Close)
	return p
}

// Subscribe starts a subscription to spec's key or prefix. It never blocks on
// etcd: the root's watch (shared with every subscription under the same root)
// is listed and opened in the background, and the subscription's first Update
// arrives on Ready. It returns an error matching ErrInvalidSpec for a malformed
// spec, a *coord.QuotaError when the tenant holds its MaxWatches already, and
// ErrClosed once the plane is closed.
func (p *Plane) Subscribe(spec Spec) (*Sub, error) {
	if spec.Key == "" {
		return nil, fmt.Errorf("%w: empty key", ErrInvalidSpec)
	}
	if spec.Root == "" {
		spec.Root = RootOf(spec.Key)
	}
	if !strings.HasPrefix(spec.Key, spec.Root) {
		return nil, fmt.Errorf("%w: key %q is not under root %q", ErrInvalidSpec, spec.Key, spec.Root)
	}
	if spec.From < 0 || spec.ProbeInterval < 0 || spec.ResetAfter < 0 {
		return nil, fmt.Errorf("%w: negative From, ProbeInterval or ResetAfter", ErrInvalidSpec)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	r := p.roots[spec.Root]
	start := r == nil
	if start {
		release, err := p.cfg.Quotas.OpenWatch(spec.Root)
		if err != nil {
			return nil, fmt.Errorf("watchplane: watch %s: %w", spec.Root, err)
		}
		r = newRoot(p, spec.Root, release)
		p.roots[spec.Root] = r
	}
	s := r.subscribe(spec)
	if start { // after the first subscriber: its From decides where the first list reads
		p.wg.Add(1)
		go r.run()
	}
	if start || spec.ProbeInterval > 0 {
		p.poke() // the probe schedule may change
	}
	return s, nil
}

// Close ends every root and subscription (their Done channels close, Err
// returns ErrClosed) and waits for the plane's goroutines. Calling it again
// does nothing.
func (p *Plane) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	roots := make([]*root, 0, len(p.roots))
	for _, r := range p.roots {
		roots = append(roots, r)
	}
	p.mu.Unlock()
	if p.forget != nil {
		p.forget()
	}
	p.stopAF()
	p.cancel()
	for _, r := range roots {
		r.close()
	}
	p.wg.Wait()
	p.in.close()
}

// Stats is what a plane holds and has done, for tests and benchmarks.
type Stats struct {
	Roots         int   // upstream watches open (one per root)
	Subscriptions int   // subscriptions served
	Opens         int64 // upstream watch opens so far (first opens and resumes)
	Relists       int64 // re-lists so far (first lists excluded)
	Resyncs       int64 // subscriber resyncs so far (starts excluded)
}

// Stats returns the plane's roots and subscriptions. It does not block.
func (p *Plane) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Stats{Roots: len(p.roots), Opens: p.opens.Load(), Relists: p.relists.Load(), Resyncs: p.resyncs.Load()}
	for _, r := range p.roots {
		st.Subscriptions += r.subCount()
	}
	return st
}

// poke wakes the maintain loop (non-blocking).
func (p *Plane) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// forgetRoot removes an idle root; it reports false when the root gained a
// subscriber meanwhile (it then stays).
func (p *Plane) forgetRoot(r *root) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.roots[r.prefix] != r || r.subCount() > 0 {
		return false
	}
	delete(p.roots, r.prefix)
	return true
}

func (p *Plane) rootList() []*root {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*root, 0, len(p.roots))
	for _, r := range p.roots {
		out = append(out, r)
	}
	return out
}

// observe reports the gauges, summed per label set (roots outside the tenant
// layout share one).
func (p *Plane) observe(o metric.Observer, up, subs metric.Int64ObservableGauge) {
	type counts struct {
		set         attribute.Set
		roots, subs int64
	}
	by := map[attribute.Distinct]*counts{}
	for _, r := range p.rootList() {
		c := by[r.attrs.Equivalent()]
		if c == nil {
			c = &counts{set: r.attrs}
			by[r.attrs.Equivalent()] = c
		}
		c.roots++
		c.subs += int64(r.subCount())
	}
	for _, c := range by {
		o.ObserveInt64(up, c.roots, metric.WithAttributeSet(c.set))
		o.ObserveInt64(subs, c.subs, metric.WithAttributeSet(c.set))
	}
}

// checkCluster returns ErrOtherCluster when h comes from another etcd cluster
// than the plane's first answer did (that answer sets the plane's cluster).
func (p *Plane) checkCluster(h *etcdserverpb.ResponseHeader) error {
	if h == nil || h.ClusterId == 0 || p.cluster.CompareAndSwap(0, h.ClusterId) {
		return nil
	}
	if first := p.cluster.Load(); h.ClusterId != first {
		return fmt.Errorf("%w: cluster %x answered, the plane's is %x", ErrOtherCluster, h.ClusterId, first)
	}
	return nil
}

// slowNotGone reports whether a request whose ctx ended met a slow etcd, not an
// unreachable one: ctx ran out of time while the client's connection was up.
// (clientv3 waits for a connection: with etcd gone a request times out too.)
func (p *Plane) slowNotGone(ctx context.Context) bool {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || p.ctx.Err() != nil {
		return false
	}
	cc := p.cli.ActiveConnection()
	return cc != nil && cc.GetState() == connectivity.Ready
}
