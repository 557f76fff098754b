package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/etcderr"
)

// Defaults of WatchConfig.
const (
	// DefaultProbeInterval: how often a linearizable read checks that the view
	// is current, independently of the watch stream (a watch can hang silently).
	DefaultProbeInterval = time.Second
	// DefaultStaleAfter: Healthy turns false when the view has not been
	// confirmed current for this long.
	DefaultStaleAfter = 3 * time.Second
	// DefaultResetAfter: a watch whose view has gone unconfirmed this long is
	// presumed hung and restarted from the last revision.
	DefaultResetAfter = 10 * time.Second
	// DefaultReadTimeout bounds each list and opening a watch (a probe is also
	// bounded by ProbeInterval).
	DefaultReadTimeout = 2 * time.Second
	// DefaultWatchBackoffCap bounds the full-jitter pause before a watch is
	// resumed, and before each probe while probes fail. It is below the
	// RFC's 30 s reconnect cap because a membership view feeds routing: the
	// view must be current within about a second of etcd's return. A fleet of
	// N watchers resumes at about N per second; raise it for very large fleets.
	DefaultWatchBackoffCap = time.Second
)

var (
	errWatchClosed = errors.New("membership: watch channel closed")
	errWatchHung   = errors.New("membership: watch presumed hung (view unconfirmed for ResetAfter)")
)

// WatchConfig configures a Watcher. Every field has a default.
type WatchConfig struct {
	ProbeInterval time.Duration // default DefaultProbeInterval
	StaleAfter    time.Duration // default DefaultStaleAfter
	ResetAfter    time.Duration // default DefaultResetAfter
	ReadTimeout   time.Duration // default DefaultReadTimeout
	// Backoff paces watch resumes and probe retries. Default: Base
	// DefaultBackoffBase, Cap DefaultWatchBackoffCap.
	Backoff coord.Backoff
	// Clock measures staleness and drives timers. Default coord.SystemClock().
	Clock coord.Clock
	// Logger receives resumes, re-lists and probe failures. Default slog.Default().
	Logger *slog.Logger
	// MeterProvider for coordkit.membership.staleness, coordkit.membership.members,
	// .watch_resumes and .relists. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
}

// withDefaults returns a copy of c with every zero field set from the
// Default… constants.
func (c WatchConfig) withDefaults() WatchConfig {
	if c.ProbeInterval == 0 {
		c.ProbeInterval = DefaultProbeInterval
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = DefaultStaleAfter
	}
	if c.ResetAfter == 0 {
		c.ResetAfter = DefaultResetAfter
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.Backoff.Base == 0 {
		c.Backoff.Base = DefaultBackoffBase
	}
	if c.Backoff.Cap == 0 {
		c.Backoff.Cap = DefaultWatchBackoffCap
	}
	c.Clock = coord.OrSystem(c.Clock)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MeterProvider == nil {
		c.MeterProvider = otel.GetMeterProvider()
	}
	return c
}

// validate checks a WatchConfig after withDefaults. Errors are *ConfigError.
func (c WatchConfig) validate() error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"ProbeInterval", c.ProbeInterval}, {"StaleAfter", c.StaleAfter}, {"ResetAfter", c.ResetAfter}, {"ReadTimeout", c.ReadTimeout}, {"Backoff", min(c.Backoff.Base, c.Backoff.Cap)}} {
		if f.d < 0 {
			return &ConfigError{Field: f.name, Reason: "negative"}
		}
	}
	return nil
}

// Watcher keeps a consistent view of one service's members: it lists the
// prefix at one revision (a linearizable read), watches from the next, resumes
// from the last revision after any error, re-lists once after a compaction, and
// confirms the view current with a probe independent of the watch. It never
// stops on its own: only its context or Close end it. Safe for concurrent use.
type Watcher struct {
	cli     *clientv3.Client
	cfg     WatchConfig
	tenant  string
	service string
	prefix  string
	in      *watchInstruments

	ctx     context.Context
	cancel  context.CancelCauseFunc
	wg      sync.WaitGroup
	base    time.Time // clock reading at start; confirmations are offsets from it
	updates chan View // cap 1, latest wins
	refresh chan chan error

	view      atomic.Pointer[View]
	observed  atomic.Pointer[observation]
	confirmed atomic.Int64 // offset of the last confirmation from base, or -1

	errMu sync.Mutex
	err   error

	// owned by the run loop
	members   memberSet
	malformed map[string]int64 // key -> mod revision
	rev       int64            // the view's revision
	listed    int64            // revision of the last list: events up to it are in the view
}

// observation is what the probe compares with etcd.
type observation struct {
	rev, maxMod int64
	count       int64
}

// Watch starts a Watcher of /tenants/{tenant}/members/{service}/ and returns at
// once; the first View arrives on Updates (and in View) after the first list.
// The watcher runs until ctx ends or Close is called; while etcd is unreachable
// it keeps the last view (fail static) and reports its staleness. It returns a
// *ConfigError (ErrInvalidConfig) for an invalid name (unwrapping to the
// *coord.NameError) or cfg (nil takes the defaults).
func Watch(ctx context.Context, cli *clientv3.Client, tenant, service string, cfg *WatchConfig) (*Watcher, error) {
	if cli == nil {
		return nil, &ConfigError{Field: "client", Reason: "nil *clientv3.Client"}
	}
	prefix, err := servicePrefix("tenant", tenant, "service", service)
	if err != nil {
		return nil, err
	}
	var c WatchConfig
	if cfg != nil {
		c = *cfg
	}
	c = c.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	w := &Watcher{
		cli: cli, cfg: c, tenant: tenant, service: service, prefix: prefix,
		base:      c.Clock.Now(),
		updates:   make(chan View, 1),
		refresh:   make(chan chan error),
		malformed: map[string]int64{},
	}
	w.confirmed.Store(-1)
	w.view.Store(&View{Tenant: tenant, Service: service})
	w.ctx, w.cancel = context.WithCancelCause(ctx)
	w.in = newWatchInstruments(c, tenant, service, w)
	w.wg.Add(2)
	go w.run()
	go w.probeLoop()
	return w, nil
}

// View returns the latest view (Revision 0 before the first list). It does not
// block.
func (w *Watcher) View() View { return *w.view.Load() }

// Updates returns a channel that receives the whole view after every change
// (and the first view after the first list). It holds only the newest: a slow
// reader skips intermediate views, never the latest. It is closed when the
// watcher stops. Meant for one reader; start another Watcher for another.
func (w *Watcher) Updates() <-chan View { return w.updates }

// Staleness returns how long ago the view was last confirmed current: the send
// time of the last list, or of the last probe that found etcd agreeing with
// the view. Before the first confirmation it is the time since Watch. It does
// not block.
func (w *Watcher) Staleness() time.Duration {
	now := w.cfg.Clock.Now().Sub(w.base)
	if c := w.confirmed.Load(); c >= 0 {
		return max(0, now-time.Duration(c))
	}
	return now
}

// Healthy reports whether the watcher runs and its view was confirmed current
// within StaleAfter. It does not block.
func (w *Watcher) Healthy() bool {
	return w.ctx.Err() == nil && w.Staleness() <= w.cfg.StaleAfter
}

// Err returns the last error the watcher met (nil once it recovered) while it
// runs, and why it stopped afterwards (ErrClosed, or the cause of its
// context). It does not block.
func (w *Watcher) Err() error {
	if w.ctx.Err() != nil {
		return fmt.Errorf("membership: watcher stopped: %w", context.Cause(w.ctx))
	}
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.err
}

// Refresh re-reads the whole service at a new revision (one linearizable
// list) and returns the view after it; a view that changed is also delivered on
// Updates. Use it when a consumer has reason to doubt the view (gRPC's
// ResolveNow). It blocks for the list, bounded by ctx and ReadTimeout.
func (w *Watcher) Refresh(ctx context.Context) (View, error) {
	reply := make(chan error, 1)
	select {
	case w.refresh <- reply:
	case <-ctx.Done():
		return w.View(), context.Cause(ctx)
	case <-w.ctx.Done():
		return w.View(), fmt.Errorf("membership: refresh: %w", ErrClosed)
	}
	select {
	case err := <-reply:
		return w.View(), err
	case <-ctx.Done():
		return w.View(), context.Cause(ctx)
	}
}

// Close stops the watcher and waits for its goroutines. Updates is closed.
func (w *Watcher) Close() {
	w.cancel(ErrClosed)
	w.wg.Wait()
	w.in.close()
}

func (w *Watcher) setErr(err error) {
	w.errMu.Lock()
	w.err = err
	w.errMu.Unlock()
}

// confirm records that the view was current as of sent.
func (w *Watcher) confirm(sent time.Time) {
	off := int64(sent.Sub(w.base))
	for {
		old := w.confirmed.Load()
		if old >= off || w.confirmed.CompareAndSwap(old, off) {
			return
		}
	}
}

// run is the list/watch loop. It returns only when the watcher stops.
func (w *Watcher) run() {
	defer w.wg.Done()
	defer close(w.updates)
	attempt := 0
	needList := true
	for w.ctx.Err() == nil {
		if needList {
			if err := w.list(w.ctx); err != nil {
				if w.ctx.Err() != nil {
					return
				}
				w.setErr(err)
				w.cfg.Logger.Warn("membership: list failed; keeping the last view", "prefix", w.prefix, "attempt", attempt, "err", err)
				if !w.pause(attempt, &needList) {
					return
				}
				attempt++
				continue
			}
			needList = false
		}
		delivered, compacted, err := w.watch()
		if w.ctx.Err() != nil {
			return
		}
		if delivered {
			attempt = 0
		}
		w.in.resumes.Add(w.ctx, 1, metric.WithAttributeSet(w.in.attrs))
		if compacted {
			needList = true
			w.in.relists.Add(w.ctx, 1, metric.WithAttributeSet(w.in.attrs))
		}
		w.setErr(err)
		w.cfg.Logger.Info("membership: watch ended; resuming", "prefix", w.prefix, "revision", w.rev, "relist", compacted, "attempt", attempt, "err", err)
		if !w.pause(attempt, &needList) {
			return
		}
		attempt++
	}
}

// pause waits a full-jitter backoff before the next attempt, serving Refresh
// requests (a successful one clears *needList). It returns false when the
// watcher stops.
func (w *Watcher) pause(attempt int, needList *bool) bool {
	reconnect(w.cli)
	t := w.cfg.Clock.NewTimer(w.cfg.Backoff.Delay(attempt))
	defer t.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return false
		case <-t.C():
			return true
		case reply := <-w.refresh:
			err := w.list(w.ctx)
			if err == nil {
				*needList = false
			}
			reply <- err
		}
	}
}

// watch watches from w.rev+1 until the watch fails, is compacted, closes or is
// presumed hung. delivered reports whether it delivered anything.
func (w *Watcher) watch() (delivered, compacted bool, err error) {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(w.ctx))
	defer cancel()
	wch, err := openWatch(ctx, cancel, w.cli, w.cfg.ReadTimeout, w.prefix, clientv3.WithPrefix(), clientv3.WithRev(w.rev+1))
	if err != nil {
		return false, false, err
	}
	clk := w.cfg.Clock
	opened := clk.Now()
	check := clk.NewTimer(w.cfg.ProbeInterval)
	defer func() { check.Stop() }()
	for {
		select {
		case <-w.ctx.Done():
			return delivered, false, context.Cause(w.ctx)
		case <-check.C():
			if w.Staleness() > w.cfg.ResetAfter && clk.Now().Sub(opened) > w.cfg.ResetAfter {
				return delivered, false, errWatchHung
			}
			check = clk.NewTimer(w.cfg.ProbeInterval)
		case reply := <-w.refresh:
			reply <- w.list(w.ctx)
		case wr, ok := <-wch:
			// Apply this response and every one already waiting, then publish
			// once: a burst of changes costs one view, not one per event.
			// Changes applied before a failing response are published too.
			changed := false
		drain:
			for {
				if !ok {
					w.publish(changed)
					return delivered, false, errWatchClosed
				}
				if wr.CompactRevision != 0 || errors.Is(wr.Err(), rpctypes.ErrCompacted) {
					w.publish(changed)
					return delivered, true, fmt.Errorf("membership: watch %s from revision %d: compacted at %d: %w",
						w.prefix, w.rev+1, wr.CompactRevision, coord.ErrCompacted)
				}
				if err := wr.Err(); err != nil {
					w.publish(changed)
					return delivered, false, fmt.Errorf("membership: watch %s: %w", w.prefix, etcderr.Classify(err))
				}
				if !wr.Created {
					delivered = true
					if wr.IsProgressNotify() {
						w.rev = max(w.rev, wr.Header.Revision)
					}
					for _, ev := range wr.Events {
						changed = w.apply(ev) || changed
					}
				}
				select {
				case wr, ok = <-wch:
				default:
					break drain
				}
			}
			w.publish(changed)
		}
	}
}

// apply applies one event newer than the view and reports whether the members
// changed.
func (w *Watcher) apply(ev *clientv3.Event) bool {
	kv := ev.Kv
	if kv.ModRevision <= w.listed {
		return false // in the view already: a Refresh listed past it
	}
	w.rev = max(w.rev, kv.ModRevision) // one request can change several keys at one revision
	key := string(kv.Key)
	_, wasBad := w.malformed[key]
	delete(w.malformed, key)
	if ev.Type == mvccpb.DELETE {
		return w.members.remove(strings.TrimPrefix(key, w.prefix)) || wasBad
	}
	w.add(&w.members, kv)
	return true
}

// add records one key of the prefix in set, or as malformed.
func (w *Watcher) add(set *memberSet, kv *mvccpb.KeyValue) {
	m, ok := decodeKV(w.prefix, kv)
	if ok {
		set.put(m)
		return
	}
	set.remove(m.Instance) // a member's key rewritten with a value that does not decode
	w.malformed[string(kv.Key)] = kv.ModRevision
}

// list reads the whole prefix at one linearizable revision and replaces the
// view with it.
func (w *Watcher) list(ctx context.Context) error {
	sent := w.cfg.Clock.Now()
	ctx, cancel := context.WithTimeout(ctx, w.cfg.ReadTimeout)
	defer cancel()
	resp, err := w.cli.Get(ctx, w.prefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("membership: list %s: %w", w.prefix, etcderr.Classify(err))
	}
	if resp.Header.Revision < w.rev {
		return nil // cannot happen with a linearizable read; keep the newer view
	}
	oldBad := w.malformed
	w.malformed = map[string]int64{}
	// etcd returns keys in byte order, the order of the set: each put appends.
	set := memberSet{ms: make([]Member, 0, len(resp.Kvs))}
	for _, kv := range resp.Kvs {
		w.add(&set, kv)
	}
	changed := w.view.Load().Revision == 0 || !set.equal(&w.members) || !maps.Equal(oldBad, w.malformed)
	w.members = set
	w.rev, w.listed = resp.Header.Revision, resp.Header.Revision
	w.publish(changed)
	w.confirm(sent)
	w.setErr(nil)
	return nil
}

// publish stores the view at w.rev and, when the members changed, offers it on
// Updates (replacing an unread one: only this goroutine sends).
func (w *Watcher) publish(changed bool) {
	v := *w.view.Load()
	v.Revision = w.rev
	if changed {
		v.Members = w.members.snapshot()
		v.Malformed = slices.Sorted(maps.Keys(w.malformed))
	}
	o := &observation{rev: w.rev, count: int64(len(v.Members) + len(w.malformed))}
	for _, m := range v.Members {
		o.maxMod = max(o.maxMod, m.ModRevision)
	}
	for _, r := range w.malformed {
		o.maxMod = max(o.maxMod, r)
	}
	w.view.Store(&v)
	w.observed.Store(o)
	if !changed {
		return
	}
	select {
	case <-w.updates:
	default:
	}
	w.updates <- v
}

// probeLoop confirms the view current every ProbeInterval; while probes fail
// it retries sooner, with full jitter below ProbeInterval, asking the client to
// reconnect each time, so the view is confirmed within about ProbeInterval of
// etcd's return.
func (w *Watcher) probeLoop() {
	defer w.wg.Done()
	retry := coord.Backoff{Base: min(w.cfg.Backoff.Base, w.cfg.ProbeInterval), Cap: min(w.cfg.Backoff.Cap, w.cfg.ProbeInterval)}
	d, failures := w.cfg.ProbeInterval, 0
	for {
		t := w.cfg.Clock.NewTimer(d)
		select {
		case <-w.ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		d = w.cfg.ProbeInterval
		if err := w.probe(); err != nil {
			if w.ctx.Err() != nil {
				return
			}
			w.cfg.Logger.Debug("membership: staleness probe failed", "prefix", w.prefix, "err", err)
			reconnect(w.cli)
			d = retry.Delay(failures)
			failures++
		} else {
			failures = 0
		}
	}
}

// probe does one linearizable read of the prefix — keys only, the count and the
// highest mod revision — and confirms the view current as of the moment the
// read was sent when the view has reached the read's revision, or has the same
// key count and highest mod revision (for one prefix at two revisions that
// means equal: any put raises the highest mod revision, a pure delete lowers
// the count).
func (w *Watcher) probe() error {
	sent := w.cfg.Clock.Now()
	ctx, cancel := context.WithTimeout(w.ctx, min(w.cfg.ReadTimeout, w.cfg.ProbeInterval))
	defer cancel()
	resp, err := w.cli.Get(ctx, w.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil {
		return fmt.Errorf("membership: probe %s: %w", w.prefix, etcderr.Classify(err))
	}
	var maxMod int64
	if len(resp.Kvs) > 0 {
		maxMod = resp.Kvs[0].ModRevision
	}
	if o := w.observed.Load(); o != nil &&
		(o.rev >= resp.Header.Revision || (o.count == resp.Count && o.maxMod == maxMod)) {
		w.confirm(sent)
	}
	return nil
}
