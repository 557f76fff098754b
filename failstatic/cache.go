package failstatic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/watchplane"
)

// Cache serves the latest valid snapshot of a key or prefix in etcd, and keeps
// serving the last good one while etcd is unreachable. All methods are safe for
// concurrent use. Create one with New; stop it with Close.
type Cache[T any] struct {
	cfg      Config[T]
	client   *clientv3.Client
	watched  string
	isPrefix bool
	clock    coord.Clock
	sysClock bool      // clock is the system clock: Staleness reads the coarse clock below
	base     time.Time // staleness offsets are measured from here (monotonic)
	log      *slog.Logger
	tel      *telemetry

	plane          *watchplane.Plane // private (closed by Close) when PrivateWatches
	sub            *watchplane.Sub
	restartsBefore int64 // the root's watch restarts before this cache subscribed (Status.Reconnects)
	cur            atomic.Pointer[state[T]]
	confirmedOff   atomic.Int64 // ns after base at which the cache was last confirmed current
	coarseOff      atomic.Int64 // ns after base, refreshed every coarseTick while running (system clock only)
	coarse         atomic.Bool  // coarseOff is being refreshed
	rejected       atomic.Int64
	coalesced      atomic.Int64
	relists        atomic.Int64

	mu       sync.Mutex // guards the status errors below
	lastErr  error
	lastRej  error
	stateErr error

	subs subscribers[T]

	persistKick chan struct{}
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	closeOnce   sync.Once

	// owned by the run goroutine (and by New before it starts)
	work  map[string]KV
	dirty map[string]int64 // keys touched since the last adoption → revision observed
	rev   int64            // every event up to rev has been applied to work
}

// Status is the data-source status of a Cache, for health endpoints and logs.
type Status struct {
	Source     Source
	Revision   int64
	Staleness  time.Duration
	Connected  bool  // the watch of the cache's root is open and without error
	Rejected   int64 // snapshots rejected by Decode or Validate
	Coalesced  int64 // snapshots a slow subscriber was not given on their own: merged into its next update
	Reconnects int64 // watch restarts of the root since the cache started (disconnect, hang, compaction)
	Relists    int64 // full re-reads (resyncs) after the first: a compaction, or the cache fell behind
	// LastError is the last list, watch or probe error (nil once recovered). It
	// matches coord.ErrNoLeader when etcd had no leader and coord.ErrCompacted
	// when the watch was compacted away (the cache then re-lists by itself).
	LastError error
	// LastRejection is the last *RejectedError, kept until a snapshot is adopted.
	LastRejection error
	// StateFileError is the last problem reading (*StateFileError) or writing the
	// state file, nil if none.
	StateFileError error
}

// New reads the key or prefix in cfg at one revision, adopts the snapshot if it
// decodes and validates, and keeps it current in the background. It watches
// through the client's shared watch plane (one upstream etcd watch per tenant
// kind for the whole process; cfg.PrivateWatches for one of its own): New's
// read is the plane's mirror, confirmed current by a read sent after New began.
//
// If etcd does not answer with a valid snapshot within cfg.DiskFallbackAfter and
// cfg.StatePath holds a usable last-known-good snapshot, New serves that one
// (Source disk) and keeps trying etcd in the background. Without a usable state
// file it waits up to cfg.InitialTimeout and then returns an error matching
// ErrNoSnapshot. It never serves a partial snapshot. A corrupt state file is
// ignored, logged and reported in Status().StateFileError.
//
// ctx bounds New only (a cancelled ctx returns its cause); the background work
// runs until Close. New blocks at most max(InitialTimeout, DiskFallbackAfter)
// plus one RequestTimeout.
func New[T any](ctx context.Context, client *clientv3.Client, cfg Config[T]) (*Cache[T], error) {
	if client == nil {
		return nil, &ConfigError{Field: "client", Reason: "nil etcd client"}
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Classes = append([]KeyClass(nil), cfg.Classes...)
	c := &Cache[T]{
		cfg:         cfg,
		client:      client,
		clock:       cfg.Clock,
		base:        cfg.Clock.Now(),
		log:         cfg.Logger.With("failstatic", first(cfg.Prefix, cfg.Key)),
		work:        map[string]KV{},
		dirty:       map[string]int64{},
		persistKick: make(chan struct{}, 1),
	}
	c.watched, c.isPrefix = cfg.watched()
	c.sysClock = cfg.Clock == coord.SystemClock()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}

	tel, err := newTelemetry(c)
	if err != nil {
		return nil, err
	}
	c.tel = tel
	if err := c.subscribe(client); err != nil {
		tel.close()
		return nil, err
	}
	c.subs.coalesced = func() {
		c.coalesced.Add(1)
		tel.coalesced.Add(context.Background(), 1, tel.attrs)
	}
	disk, diskErr := c.loadDisk()
	wait := cfg.InitialTimeout
	if disk != nil {
		wait = cfg.DiskFallbackAfter
	}
	ictx, cancel := context.WithTimeout(ctx, wait)
	liveErr := c.initialList(ictx)
	cancel()
	if err := context.Cause(ctx); err != nil && liveErr != nil {
		c.unsubscribe()
		tel.close()
		return nil, err
	}
	switch {
	case liveErr == nil:
	case disk != nil:
		c.cur.Store(disk)
		c.log.Warn("serving last-known-good snapshot from disk", "revision", disk.rev, "cause", liveErr)
		c.setErr(liveErr)
	default:
		c.unsubscribe()
		tel.close()
		return nil, fmt.Errorf("%w: %w", ErrNoSnapshot, errors.Join(liveErr, diskErr))
	}
	bg, stop := context.WithCancel(context.Background())
	c.cancel = stop
	if c.sysClock {
		c.coarseOff.Store(int64(time.Since(c.base)))
		c.coarse.Store(true)
		c.wg.Add(1)
		go func() { defer c.wg.Done(); c.tickCoarse(bg) }()
	}
	c.wg.Add(2)
	go func() { defer c.wg.Done(); c.run(bg) }()
	go func() { defer c.wg.Done(); c.persistLoop(bg) }()
	if liveErr == nil {
		c.kickPersist()
	}
	return c, nil
}

// subscribe starts the cache's subscription on the watch plane.
func (c *Cache[T]) subscribe(client *clientv3.Client) error {
	if c.cfg.PrivateWatches {
		c.plane = watchplane.New(client, watchplane.Config{Clock: c.clock, RequestTimeout: c.cfg.RequestTimeout,
			Logger: c.cfg.Logger, MeterProvider: c.cfg.MeterProvider})
	} else {
		c.plane = watchplane.For(client, c.clock)
	}
	sub, err := c.plane.Subscribe(watchplane.Spec{Key: c.watched, Prefix: c.isPrefix,
		ProbeInterval: c.cfg.ProbeInterval, ResetAfter: c.cfg.ResetAfter,
		RequestTimeout: c.cfg.RequestTimeout, Backoff: c.cfg.Backoff})
	if err != nil {
		if c.cfg.PrivateWatches {
			c.plane.Close()
		}
		return fmt.Errorf("failstatic: watch %q: %w", c.watched, err)
	}
	c.sub, c.restartsBefore = sub, sub.Health().Restarts
	return nil
}

// unsubscribe ends the subscription (and a private plane).
func (c *Cache[T]) unsubscribe() {
	c.sub.Close()
	if c.cfg.PrivateWatches {
		c.plane.Close()
	}
}

// initialList waits until the plane has confirmed the watched range current by a
// read sent after this call (a linearizable read, served from the plane's
// mirror), applies it and offers it for adoption; the plane retries etcd with
// backoff meanwhile. A rejected snapshot ends the wait (the same data would be
// read again). On ctx's end it returns ctx's cause joined with the plane's last
// error (an unreachable etcd, no leader).
func (c *Cache[T]) initialList(ctx context.Context) error {
	if err := c.sub.Sync(ctx); err != nil {
		return fmt.Errorf("failstatic: list %q: %w", c.watched, errors.Join(err, c.sub.Err()))
	}
	c.drain()
	c.confirm(c.sub.Confirmed())
	return c.offer(ctx, SourceLive)
}

// Get returns the current snapshot: the decoded value, its revision, its source
// and its staleness. It never blocks, takes no lock and does not allocate. After
// Close it keeps returning the last snapshot (with growing staleness).
func (c *Cache[T]) Get() Snapshot[T] {
	st := c.cur.Load()
	return Snapshot[T]{Value: st.value, Revision: st.rev, Source: st.source, Staleness: c.Staleness()}
}

// Staleness returns the time since the cache was last confirmed current (a probe
// or a list proved that etcd had nothing the cache had not seen). It never blocks
// and does not allocate. With the system clock it is read from a clock refreshed
// every 10 ms (so Get does not pay for a clock read): it may understate by up to
// 10 ms.
func (c *Cache[T]) Staleness() time.Duration {
	var since time.Duration
	switch {
	case c.coarse.Load():
		since = time.Duration(c.coarseOff.Load()) // no clock read at all: Get stays ~ns
	case c.sysClock:
		since = time.Since(c.base) // one monotonic clock read
	default:
		since = c.clock.Now().Sub(c.base)
	}
	return max(since-time.Duration(c.confirmedOff.Load()), 0)
}

// GetClass returns the current snapshot for a reader of key class name. It fails
// closed with a *StaleError (ErrStale) once the cache has been unconfirmed for
// longer than the class's MaxStaleness, and returns ErrNotFound for an unknown
// class. It never blocks.
func (c *Cache[T]) GetClass(name string) (Snapshot[T], error) {
	s := c.Get()
	for i := range c.cfg.Classes {
		k := &c.cfg.Classes[i]
		if k.Name == name {
			if s.Staleness > k.MaxStaleness {
				return s, &StaleError{Class: k.Name, Staleness: s.Staleness, Max: k.MaxStaleness}
			}
			return s, nil
		}
	}
	return s, fmt.Errorf("%w: key class %q", ErrNotFound, name)
}

// Lookup returns one key (the full etcd key) of the current snapshot. A key in a
// KeyClass whose MaxStaleness has passed fails closed with a *StaleError
// (ErrStale); a key absent from the snapshot returns ErrNotFound. Keys outside
// every class keep serving however stale. It never blocks.
func (c *Cache[T]) Lookup(key string) (KV, error) {
	st := c.cur.Load()
	if k := c.classOf(key); k != nil {
		if s := c.Staleness(); s > k.MaxStaleness {
			return KV{}, &StaleError{Class: k.Name, Staleness: s, Max: k.MaxStaleness}
		}
	}
	kv, ok := st.kvs[key]
	if !ok {
		return KV{}, fmt.Errorf("%w: %q at revision %d", ErrNotFound, key, st.rev)
	}
	return kv, nil
}

func (c *Cache[T]) classOf(key string) *KeyClass {
	rel := key
	if c.isPrefix {
		var ok bool
		if rel, ok = strings.CutPrefix(key, c.watched); !ok {
			return nil
		}
	} else if key != c.watched {
		return nil
	} else {
		rel = ""
	}
	for i := range c.cfg.Classes {
		if strings.HasPrefix(rel, c.cfg.Classes[i].Prefix) {
			return &c.cfg.Classes[i]
		}
	}
	return nil
}

// Status returns the cache's data-source status. It does not block on etcd.
func (c *Cache[T]) Status() Status {
	st := c.cur.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.sub.Health()
	lastErr := h.Err
	if errors.Is(lastErr, watchplane.ErrClosed) || (lastErr == nil && st.source == SourceDisk) {
		lastErr = c.lastErr // closed, or never live: what New saw
	}
	return Status{
		Source: st.source, Revision: st.rev, Staleness: c.Staleness(),
		Connected: h.Watching && h.Err == nil, Rejected: c.rejected.Load(), Coalesced: c.coalesced.Load(),
		Reconnects: h.Restarts - c.restartsBefore, Relists: c.relists.Load(),
		LastError: lastErr, LastRejection: c.lastRej, StateFileError: c.stateErr,
	}
}

// Close stops watching, probing and persisting (the latest adopted snapshot is
// written first), ends every subscription and waits for the background
// goroutines. Get keeps working. Close is idempotent and returns the last error
// writing the state file, if any.
func (c *Cache[T]) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.wg.Wait()
		c.unsubscribe()
		c.subs.closeAll()
		c.tel.close()
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stateErr != nil && !errors.Is(c.stateErr, ErrCorruptState) {
		return c.stateErr
	}
	return nil
}

// confirm records that the cache was current at time t.
func (c *Cache[T]) confirm(t time.Time) {
	off := int64(t.Sub(c.base))
	for {
		old := c.confirmedOff.Load()
		if off <= old || c.confirmedOff.CompareAndSwap(old, off) {
			break
		}
	}
	c.kickPersist()
}

func (c *Cache[T]) kickPersist() {
	select {
	case c.persistKick <- struct{}{}:
	default:
	}
}

func (c *Cache[T]) setErr(err error) {
	c.mu.Lock()
	c.lastErr = err
	c.mu.Unlock()
}

func (c *Cache[T]) setStateErr(err error) {
	c.mu.Lock()
	c.stateErr = err
	c.mu.Unlock()
}

// coarseTick is the resolution of Staleness with the system clock.
const coarseTick = 10 * time.Millisecond

// tickCoarse refreshes coarseOff until ctx ends, then hands Staleness back to the
// precise clock so it keeps growing after Close.
func (c *Cache[T]) tickCoarse(ctx context.Context) {
	t := time.NewTicker(coarseTick)
	defer t.Stop()
	defer c.coarse.Store(false)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.coarseOff.Store(int64(time.Since(c.base)))
		}
	}
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
