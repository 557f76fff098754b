package failstatic_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestWatcherBlackholedDuringUpdatesAndCompaction blackholes the watcher's
// connection while updates (puts and deletes; 200 per trial by default, 1,000 with
// COORD_FULL=1) land and the history is compacted past them. After the network
// heals, the cache must equal etcd's state in every trial, and replaying the
// changes its subscriber received, in order, onto the starting state must give
// the same state (none missing, none out of order).
func TestWatcherBlackholedDuringUpdatesAndCompaction(t *testing.T) {
	res := coordtest.NewResult(t, "watcher blackholed while updates land and history is compacted", coordtest.Faults("watcher connection blackholed", "history compacted past the watcher"))
	defer coordtest.Report(t, res)
	trials, updates := 3, 200
	if fullTier() {
		trials, updates = 10, 1000
	}
	etcd := coordtest.Etcd(t)
	writer := etcd.Client(t)
	proxy := coordtest.NewProxy(t, strings.TrimPrefix(etcd.Endpoints[0], "http://"))
	prefix := testPrefix(t)
	put(t, writer, prefix+"k000", "seed")

	cfg := baseConfig(prefix)
	cfg.ProbeInterval = 100 * time.Millisecond
	cfg.RequestTimeout = 500 * time.Millisecond
	cfg.ResetAfter = time.Second
	cfg.Backoff.Cap = 2 * time.Second // keep the default tier quick; the schedule is tested in TestReconnectHerd
	compactedErrs := &errorCounter{match: coord.ErrCompacted}
	cfg.Logger = slog.New(compactedErrs)
	cfg.PrivateWatches = true // the plane logs the compaction to cfg.Logger
	c := mustNew(t, coordtest.NewEtcdClient(t, proxy.URL()), cfg)
	// Nothing is written between capturing the start and subscribing.
	rec := recorder{start: maps.Clone(c.Get().Value)}
	defer c.Subscribe(rec.fn)()

	rng := rand.New(rand.NewPCG(1, 2))
	compactions, deletes := 0, 0
	for trial := range trials {
		coordtest.Until(t, 30*time.Second, 5*time.Millisecond, "cache current before the trial", func() bool {
			want, _ := etcdState(t, writer, prefix)
			return equalConf(c.Get().Value, want) && c.Staleness() < 500*time.Millisecond
		})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		for i := range 20 { // live events through the watch first
			put(t, writer, fmt.Sprintf("%sk%03d", prefix, rng.IntN(50)), fmt.Sprintf("t%d-live%d", trial, i))
		}
		relistsBefore, dropBefore := c.Status().Relists, proxy.Stats().DroppedBytes
		proxy.Blackhole()
		for i := range updates {
			k := fmt.Sprintf("%sk%03d", prefix, rng.IntN(50))
			if rng.IntN(10) == 0 {
				if _, err := writer.Delete(ctx, k); err != nil {
					t.Fatal(err)
				}
				deletes++
				continue
			}
			if _, err := writer.Put(ctx, k, fmt.Sprintf("t%d-u%d", trial, i)); err != nil {
				t.Fatal(err)
			}
		}
		_, rev := etcdState(t, writer, prefix)
		if _, err := writer.Compact(ctx, rev); err != nil {
			t.Fatal(err)
		}
		cancel()
		compactions++
		time.Sleep(300 * time.Millisecond) // let the watcher's bytes pile into the hole
		proxy.Heal()

		want, _ := etcdState(t, writer, prefix)
		coordtest.Until(t, 60*time.Second, 5*time.Millisecond, fmt.Sprintf("trial %d: cache equals etcd after heal", trial), func() bool {
			return equalConf(c.Get().Value, want)
		})
		// Each fault counts when its effect was observed: bytes the proxy swallowed,
		// and the re-list the watcher had to make because its revision was compacted.
		if d := proxy.Stats().DroppedBytes - dropBefore; d == 0 {
			t.Fatalf("trial %d: blackhole dropped nothing", trial)
		}
		res.Faults["watcher connection blackholed"]++
		if c.Status().Relists == relistsBefore {
			t.Fatalf("trial %d: no re-list after the compaction", trial)
		}
		// The compaction is reported as coord.ErrCompacted (logged, and in
		// Status().LastError until the re-list succeeds).
		if n := compactedErrs.n.Load(); n < int64(trial+1) {
			t.Fatalf("trial %d: %d errors matching coord.ErrCompacted logged, want at least %d", trial, n, trial+1)
		}
		res.Faults["history compacted past the watcher"]++
		// Replay the subscriber's changes.
		coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "subscriber to catch up", func() bool {
			snaps, _ := rec.get()
			return len(snaps) > 0 && equalConf(snaps[len(snaps)-1].Value, want)
		})
		rec.checkOrdered(t)
		if got := replay(t, &rec); !equalConf(got, want) {
			t.Fatalf("trial %d: replayed changes give %d keys, etcd has %d", trial, len(got), len(want))
		}
	}
	st := proxy.Stats()
	snaps, _ := rec.get()
	t.Logf("trials %d × %d updates (%d deletes), compactions %d, blackholes %d, dropped %d bytes, relists %d, reconnects %d, snapshots delivered %d",
		trials, updates, deletes, compactions, st.Blackholes, st.DroppedBytes, c.Status().Relists, c.Status().Reconnects, len(snaps))
	res.Trials = trials
	res.Outcome["updates while blackholed"] = int64(trials * updates)
	res.Outcome["deletes among them"] = int64(deletes)
	res.Outcome["bytes dropped"] = st.DroppedBytes
	res.Outcome["relists"] = c.Status().Relists
	res.Outcome["reconnects"] = c.Status().Reconnects
	res.Outcome["snapshots delivered"] = int64(len(snaps))
	res.Notes = "after each heal the cache equals etcd and the subscriber's changes replay, in order, to the same state"
	if st.Blackholes != trials || compactions != trials {
		t.Fatalf("faults: %d blackholes, %d compactions, want %d", st.Blackholes, compactions, trials)
	}
}

// replay applies every change the recorder saw, in order, to its start state.
func replay(t testing.TB, r *recorder) conf {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	m := maps.Clone(r.start)
	for _, ch := range r.changes {
		if ch.Deleted {
			delete(m, ch.Key)
		} else {
			m[ch.Key] = string(ch.Value)
		}
	}
	return m
}

// errorCounter is a slog.Handler counting the records with an error attribute
// matching match.
type errorCounter struct {
	match error
	n     atomic.Int64
}

func (*errorCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *errorCounter) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && errors.Is(err, h.match) {
			h.n.Add(1)
			return false
		}
		return true
	})
	return nil
}
func (h *errorCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *errorCounter) WithGroup(string) slog.Handler      { return h }
