package failstatic_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func fullTier() bool { return coordtest.Full() }

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAllMembersStoppedAndClientRestarted freezes every etcd member (SIGSTOP) for
// the outage (12 s by default, 60 s with COORD_FULL=1) and restarts the client
// half way through (a second New, with a fresh etcd client, from a copy of the
// state files taken while the first cache was still running — what a crash
// leaves behind). Every
// read must be served, staleness must grow monotonically and stay within 1 s of
// the truth (time since the freeze), and the fail-closed class must fail at its
// threshold ± 1 s while the other keys keep serving.
func TestAllMembersStoppedAndClientRestarted(t *testing.T) {
	res := coordtest.NewResult(t, "every etcd member frozen, client restarted from disk mid-outage", coordtest.Faults("etcd member SIGSTOPped", "client restarted from disk (in process)", "client process re-executed from disk"))
	defer coordtest.Report(t, res)
	outage, threshold := 12*time.Second, 3*time.Second
	if fullTier() {
		outage, threshold = 60*time.Second, 20*time.Second
	}
	cluster := coordtest.EtcdCluster(t, 3, nil)
	writer := cluster.Client(t)
	prefix := testPrefix(t)
	flagKey, revKey := prefix+"flags/checkout", prefix+"revocations/token-1"
	put(t, writer, flagKey, "on")
	put(t, writer, revKey, "revoked")
	want, _ := etcdState(t, writer, prefix)

	cfg := baseConfig(prefix)
	cfg.StatePath = filepath.Join(t.TempDir(), "state")
	cfg.ProbeInterval = 200 * time.Millisecond
	cfg.RequestTimeout = 500 * time.Millisecond
	cfg.ResetAfter = 2 * time.Second
	cfg.Classes = []failstatic.KeyClass{{Name: "revocations", Prefix: "revocations/", MaxStaleness: threshold}}
	c1 := mustNew(t, cluster.Client(t), cfg)
	coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "a fresh confirmation", func() bool { return c1.Staleness() < 100*time.Millisecond })

	for _, m := range cluster.Members {
		if err := m.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	frozen := time.Now()
	t.Logf("froze %d members for %v", len(cluster.Members), outage)

	var (
		reads, served, staleFails, earlyFails int
		maxDev, lastStale                     time.Duration
		firstFail                             time.Duration = -1
		restartTook                           time.Duration
		restarts                              int
		diskRev                               int64
		processRestarts                       int
		childStartMs                          int64
		childReads                            []childRead
		maxChildDev                           time.Duration
		rec                                   recorder
		stopSub                               = func() {}
	)
	defer func() { stopSub() }()
	c := c1
	for truth := time.Since(frozen); truth < outage; truth = time.Since(frozen) {
		if restarts == 0 && truth > outage/2 {
			// The client process crashes and restarts while etcd is frozen: the
			// new process gets the state files exactly as the running one left
			// them (copied before Close, so Close's final flush does not help).
			crashed := cfg
			crashed.StatePath = filepath.Join(t.TempDir(), "state")
			copyFile(t, cfg.StatePath, crashed.StatePath)
			copyFile(t, cfg.StatePath+".confirmed", crashed.StatePath+".confirmed")
			if err := c1.Close(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			c = mustNew(t, coordtest.NewEtcdClient(t, cluster.Endpoints()...), crashed)
			restartTook = time.Since(start)
			restarts++
			diskRev = c.Get().Revision
			stopSub = c.Subscribe(rec.fn)
			if src := c.Get().Source; src != failstatic.SourceDisk {
				t.Fatalf("after restart source = %v, want disk", src)
			}
			// And a real separate process (the test binary re-executed) starting
			// from the same crash-time files.
			childState := filepath.Join(t.TempDir(), "state")
			copyFile(t, crashed.StatePath, childState)
			copyFile(t, crashed.StatePath+".confirmed", childState+".confirmed")
			childStartMs, childReads = runChild(t, childState, prefix, cluster.Endpoints(), threshold)
			processRestarts++
			for _, r := range childReads {
				truth := r.at.Sub(frozen)
				if r.source != "disk" || r.keys != len(want) {
					t.Fatalf("child read %+v: want %d keys from disk", r, len(want))
				}
				if d := (r.staleness - truth).Abs(); d > time.Second {
					t.Fatalf("child staleness %v, truth %v", r.staleness, truth)
				}
				maxChildDev = max(maxChildDev, (r.staleness - truth).Abs())
				if near := (r.staleness - threshold).Abs() < 50*time.Millisecond; !near && r.closed != (r.staleness > threshold) {
					t.Fatalf("child: revocation closed=%v at staleness %v (threshold %v)", r.closed, r.staleness, threshold)
				}
			}
			truth = time.Since(frozen)
		}
		s := c.Get()
		reads++
		if equalConf(s.Value, want) {
			served++
		}
		// Monotonic (across the restart too, allowing the wall/monotonic handover 50 ms).
		if s.Staleness+50*time.Millisecond < lastStale {
			t.Fatalf("staleness went back from %v to %v at truth %v", lastStale, s.Staleness, truth)
		}
		lastStale = s.Staleness
		maxDev = max(maxDev, (s.Staleness - truth).Abs())
		if _, err := c.Lookup(flagKey); err != nil {
			t.Fatalf("unclassed key failed at truth %v: %v", truth, err)
		}
		_, err := c.Lookup(revKey)
		switch {
		case errors.Is(err, failstatic.ErrStale):
			staleFails++
			if firstFail < 0 {
				firstFail = truth
			}
			if truth < threshold-time.Second {
				earlyFails++
			}
		case err != nil:
			t.Fatalf("revocation lookup: %v", err)
		case truth > threshold+time.Second:
			t.Fatalf("revocation still served at truth %v (threshold %v)", truth, threshold)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, m := range cluster.Members {
		if err := m.Resume(); err != nil {
			t.Fatal(err)
		}
	}
	var pauses, resumes int
	for _, m := range cluster.Members {
		pauses += m.Stats().Pauses
		resumes += m.Stats().Resumes
	}
	t.Logf("faults: %d pauses, %d resumes, %d client restarts (New from disk took %v); reads %d, served %d, max |staleness-truth| %v, revocations failed closed first at %v (threshold %v), %d closed reads",
		pauses, resumes, restarts, restartTook, reads, served, maxDev, firstFail, threshold, staleFails)
	t.Logf("re-executed client process: %d reads from disk, New took %d ms, max |staleness-truth| %v", len(childReads), childStartMs, maxChildDev)
	res.Trials = reads
	res.Faults["etcd member SIGSTOPped"] = pauses
	res.Faults["client restarted from disk (in process)"] = restarts
	res.Faults["client process re-executed from disk"] = processRestarts
	res.Outcome["reads served"] = int64(served)
	res.Outcome["max staleness deviation ms"] = maxDev.Milliseconds()
	res.Outcome["fail-closed reads"] = int64(staleFails)
	res.Outcome["fail-closed reads before threshold - 1 s"] = int64(earlyFails)
	res.Outcome["first fail-closed ms"] = firstFail.Milliseconds()
	res.Outcome["restart from disk ms"] = restartTook.Milliseconds()
	res.Outcome["child process reads from disk"] = int64(len(childReads))
	res.Outcome["child process New ms"] = childStartMs
	res.Outcome["child max staleness deviation ms"] = maxChildDev.Milliseconds()
	res.Notes = fmt.Sprintf("outage %v, fail-closed threshold %v; trials = reads during the outage", outage, threshold)
	if pauses != 3 || resumes != 3 || restarts != 1 || processRestarts != 1 {
		t.Fatalf("faults not injected: pauses=%d resumes=%d restarts=%d", pauses, resumes, restarts)
	}
	if served != reads || reads == 0 {
		t.Fatalf("served %d of %d reads", served, reads)
	}
	if maxDev > time.Second {
		t.Fatalf("staleness deviated from truth by %v", maxDev)
	}
	if firstFail < threshold-time.Second || firstFail > threshold+time.Second || earlyFails > 0 {
		t.Fatalf("fail-closed at %v, want %v ± 1s (early fails %d)", firstFail, threshold, earlyFails)
	}

	// After the outage the cache goes live again and is confirmed current.
	put(t, writer, prefix+"flags/after", "1")
	coordtest.Until(t, 90*time.Second, 5*time.Millisecond, "live and current after the outage", func() bool {
		s := c.Get()
		return s.Source == failstatic.SourceLive && s.Value[prefix+"flags/after"] == "1" && s.Staleness < time.Second
	})
	if _, err := c.Lookup(revKey); err != nil {
		t.Fatalf("revocations still closed after recovery: %v", err)
	}
	// Going live never replayed history older than the disk snapshot.
	rec.checkOrdered(t)
	snaps, _ := rec.get()
	for _, s := range snaps {
		if s.Revision < diskRev {
			t.Fatalf("after restart from disk at revision %d the cache adopted older revision %d", diskRev, s.Revision)
		}
	}
}
