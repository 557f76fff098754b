package membership

import (
	"cmp"
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
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/watchplane"
)

// Defaults of WatchConfig.
const (
	// DefaultProbeInterval: how often the watch plane confirms that the view is
	// current, independently of the watch stream (a watch can hang silently).
	DefaultProbeInterval = time.Second
	// DefaultStaleAfter: Healthy turns false when the view has not been
	// confirmed current for this long.
	DefaultStaleAfter = 3 * time.Second
	// DefaultResetAfter: a watch whose view has gone unconfirmed this long is
	// presumed hung and restarted from the last revision.
	DefaultResetAfter = 10 * time.Second
	// DefaultReadTimeout bounds each list, probe and watch open, and Refresh.
	DefaultReadTimeout = 2 * time.Second
	// DefaultWatchBackoffCap bounds the full-jitter pause before a watch is
	// resumed. It is below the RFC's 30 s reconnect cap because a membership
	// view feeds routing: the view must be current within about a second of
	// etcd's return. A fleet of N processes resumes at about N per second.
	DefaultWatchBackoffCap = time.Second
)

// WatchConfig configures a Watcher. Every field has a default. ProbeInterval,
// ResetAfter, ReadTimeout and Backoff are asked of the watch plane's root this
// watcher shares with other components of the process (the members of the
// tenant: one upstream etcd watch), which follows the most demanding of them.
type WatchConfig struct {
	ProbeInterval time.Duration // default DefaultProbeInterval
	StaleAfter    time.Duration // default DefaultStaleAfter
	ResetAfter    time.Duration // default DefaultResetAfter
	ReadTimeout   time.Duration // default DefaultReadTimeout
	// Backoff paces watch resumes. Default: Base DefaultBackoffBase, Cap
	// DefaultWatchBackoffCap.
	Backoff coord.Backoff
	// Clock measures staleness and drives timers. Default coord.SystemClock().
	Clock coord.Clock
	// Logger receives re-lists. Default slog.Default().
	Logger *slog.Logger
	// MeterProvider for coordkit.membership.staleness, coordkit.membership.members
	// and .relists. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// PrivateWatches gives the watcher a watch plane of its own (its own
	// upstream etcd watch, closed with the watcher) instead of the client's
	// shared one. Default false: share.
	PrivateWatches bool
}

// withDefaults returns a copy of c with every zero field set from the
// Default… constants.
func (c WatchConfig) withDefaults() WatchConfig {
	c.ProbeInterval = cmp.Or(c.ProbeInterval, DefaultProbeInterval)
	c.StaleAfter = cmp.Or(c.StaleAfter, DefaultStaleAfter)
	c.ResetAfter = cmp.Or(c.ResetAfter, DefaultResetAfter)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, DefaultReadTimeout)
	c.Backoff.Base = cmp.Or(c.Backoff.Base, DefaultBackoffBase)
	c.Backoff.Cap = cmp.Or(c.Backoff.Cap, DefaultWatchBackoffCap)
	c.Clock = coord.OrSystem(c.Clock)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.MeterProvider = cmp.Or(c.MeterProvider, otel.GetMeterProvider())
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

// Watcher keeps a consistent view of one service's members through the
// client's watch plane: it starts from the plane's mirror of the tenant's
// members (one linearizable list for the whole process), applies every change
// in revision order, resyncs after a compaction, and reports how long ago the
// plane last confirmed the view current. It never stops on its own: only its
// context or Close end it (or its client's Close). Safe for concurrent use.
type Watcher struct {
	cfg     WatchConfig
	tenant  string
	service string
	prefix  string
	in      *watchInstruments
	plane   *watchplane.Plane // private (closed by Close) when PrivateWatches
	sub     *watchplane.Sub

	ctx     context.Context
	cancel  context.CancelCauseFunc
	wg      sync.WaitGroup
	base    time.Time // clock reading at start: Staleness before the first confirmation
	updates chan View // cap 1, latest wins
	refresh chan chan error
	view    atomic.Pointer[View]

	// owned by the run loop
	members   memberSet
	malformed map[string]int64 // key -> mod revision
	rev       int64            // the view's revision
	synced    bool             // the first resync was applied
}

// Watch starts a Watcher of /tenants/{tenant}/members/{service}/ and returns at
// once; the first View arrives on Updates (and in View) once the plane has its
// mirror. The watcher runs until ctx ends or Close is called; while etcd is
// unreachable it keeps the last view (fail static) and reports its staleness.
// It returns a *ConfigError (ErrInvalidConfig) for an invalid name (unwrapping
// to the *coord.NameError) or cfg.
func Watch(ctx context.Context, cli *clientv3.Client, tenant, service string, cfg WatchConfig) (*Watcher, error) {
	if cli == nil {
		return nil, &ConfigError{Field: "client", Reason: "nil *clientv3.Client"}
	}
	prefix, err := servicePrefix("tenant", tenant, "service", service)
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w := &Watcher{
		cfg: cfg, tenant: tenant, service: service, prefix: prefix,
		base:      cfg.Clock.Now(),
		updates:   make(chan View, 1),
		refresh:   make(chan chan error),
		malformed: map[string]int64{},
	}
	if cfg.PrivateWatches {
		w.plane = watchplane.New(cli, watchplane.Config{Clock: cfg.Clock, RequestTimeout: cfg.ReadTimeout,
			Logger: cfg.Logger, MeterProvider: cfg.MeterProvider})
	} else {
		w.plane = watchplane.For(cli, cfg.Clock)
	}
	w.sub, err = w.plane.Subscribe(watchplane.Spec{Key: prefix, Prefix: true, ProbeInterval: cfg.ProbeInterval,
		ResetAfter: cfg.ResetAfter, RequestTimeout: cfg.ReadTimeout, Backoff: cfg.Backoff})
	if err != nil {
		w.closePlane()
		return nil, fmt.Errorf("membership: watch %s: %w", prefix, err)
	}
	w.view.Store(&View{Tenant: tenant, Service: service})
	w.ctx, w.cancel = context.WithCancelCause(ctx)
	w.in = newWatchInstruments(cfg, tenant, service, w)
	w.wg.Add(1)
	go w.run()
	return w, nil
}

// View returns the latest view (Revision 0 before the first list). It does not
// block.
func (w *Watcher) View() View { return *w.view.Load() }

// Updates returns a channel that receives the whole view after every change
// (and the first view after the first list). It holds only the newest: a slow
// reader skips intermediate views, never the latest. It is closed when the
// watcher stops. Meant for one reader; start another Watcher for another (it
// shares the same upstream watch).
func (w *Watcher) Updates() <-chan View { return w.updates }

// Staleness returns how long ago the view was last confirmed current: the send
// time of the last read (a list or a probe) that found the plane's mirror of
// the tenant's members current. Before the first confirmation it is the time
// since Watch. It does not block.
func (w *Watcher) Staleness() time.Duration {
	since := w.base
	if c := w.sub.Confirmed(); c.After(since) {
		since = c
	}
	return max(0, w.cfg.Clock.Now().Sub(since))
}

// Healthy reports whether the watcher runs and its view was confirmed current
// within StaleAfter. It does not block.
func (w *Watcher) Healthy() bool {
	return w.ctx.Err() == nil && w.Staleness() <= w.cfg.StaleAfter
}

// Err returns the last error the watch met (nil once it delivers again or is
// confirmed current) while it runs, and why it stopped afterwards (ErrClosed,
// or the cause of its context). It does not block.
func (w *Watcher) Err() error {
	if w.ctx.Err() != nil {
		return fmt.Errorf("membership: watcher stopped: %w", context.Cause(w.ctx))
	}
	if err := w.sub.Err(); err != nil {
		if errors.Is(err, watchplane.ErrClosed) {
			return fmt.Errorf("membership: watcher stopped: %w", ErrClosed)
		}
		return err
	}
	return nil
}

// Refresh waits until the view is confirmed current by a read sent after the
// call (the plane probes at once; a linearizable read served from its mirror)
// and returns the view after it; a view that changed is also delivered on
// Updates. Use it when a consumer has reason to doubt the view (gRPC's
// ResolveNow). It blocks, bounded by ctx and ReadTimeout.
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

// Close stops the watcher and waits for its goroutine. Updates is closed.
func (w *Watcher) Close() {
	w.cancel(ErrClosed)
	w.wg.Wait()
	w.in.close()
	w.sub.Close()
	w.closePlane()
}

func (w *Watcher) closePlane() {
	if w.cfg.PrivateWatches {
		w.plane.Close()
	}
}

// run applies the plane's updates until the watcher stops. A closed plane (its
// client was closed) stops the watcher.
func (w *Watcher) run() {
	defer w.wg.Done()
	defer close(w.updates)
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.sub.Done():
			w.cancel(fmt.Errorf("%w: the etcd client was closed", ErrClosed))
			return
		case <-w.sub.Ready():
			w.drain()
		case reply := <-w.refresh:
			ctx, cancel := context.WithTimeout(w.ctx, w.cfg.ReadTimeout)
			err := w.sub.Sync(ctx)
			cancel()
			w.drain()
			if err != nil {
				err = fmt.Errorf("membership: refresh %s: %w", w.prefix, errors.Join(err, w.sub.Err()))
			}
			reply <- err
		}
	}
}

// drain applies every update waiting and publishes the view once: a burst of
// changes costs one view, not one per event.
func (w *Watcher) drain() {
	// Every event up to the root's revision was queued before the revision
	// moved: read it first, and after taking everything the view is exact at it.
	rev := w.sub.Revision()
	changed, any := false, false
	for {
		u, ok := w.sub.Take()
		if !ok {
			break
		}
		any = true
		if u.Resync {
			changed = w.resync(u) || changed
		}
		for _, ev := range u.Events {
			changed = w.apply(ev) || changed
		}
		w.rev = max(w.rev, u.Revision)
	}
	if w.synced && rev > w.rev {
		w.rev, any = rev, true
	}
	if any {
		w.publish(changed)
	}
}

// resync replaces the view with the range's whole state (the start, or after a
// compaction the watcher's revision fell out of the plane's history).
func (w *Watcher) resync(u watchplane.Update) bool {
	if w.synced {
		w.in.relists.Add(w.ctx, 1, metric.WithAttributeSet(w.in.attrs))
		w.cfg.Logger.Info("membership: view resynced from the watch plane", "prefix", w.prefix, "revision", u.Revision)
	}
	oldBad := w.malformed
	w.malformed = map[string]int64{}
	// KVs come in key order, the order of the set: each put appends.
	set := memberSet{ms: make([]Member, 0, len(u.KVs))}
	for _, kv := range u.KVs {
		w.add(&set, kv)
	}
	changed := !w.synced || !set.equal(&w.members) || !maps.Equal(oldBad, w.malformed)
	w.members, w.synced = set, true
	return changed
}

// apply applies one event newer than the view and reports whether the members
// changed.
func (w *Watcher) apply(ev *clientv3.Event) bool {
	kv := ev.Kv
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

// publish stores the view at w.rev and, when the members changed, offers it on
// Updates (replacing an unread one: only this goroutine sends).
func (w *Watcher) publish(changed bool) {
	v := *w.view.Load()
	v.Revision = w.rev
	if changed {
		v.Members = w.members.snapshot()
		v.Malformed = slices.Sorted(maps.Keys(w.malformed))
	}
	w.view.Store(&v)
	if !changed {
		return
	}
	select {
	case <-w.updates:
	default:
	}
	w.updates <- v
}
