package reliability

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/reliability/internal/fleethash"
)

// fleetFigures is what one phase measured.
type fleetFigures struct {
	procs, subs, checked            int
	upstreamClient                  int     // upstream watches the processes report (ours: the plane's gauge; peer: watches opened)
	serverWatchers                  float64 // etcd's watcher gauge, every member, added by the processes
	linksCut                        int     // client connections that lost bytes to the cut (reset at the heal)
	behind, never                   int
	p50Current, p99Current, maxCurr time.Duration
	missed, duplicated, reordered   int
	wrong                           int
	msgs                            []string
	watchReqsPeak, watchReqs30s     float64 // Watch stream requests (creates, cancels, progress) per second after the heal, every member
	watchReqsBase                   float64 // per second in the baseline window
	watchReqsExcess                 float64 // in the 30 s after the heal, beyond the baseline rate: about the watch creates
	requestsBase, requestsPeak      float64 // etcd requests (etcd_server_request_duration_seconds) per second: baseline, busiest second after the heal
	creates, createsPeak            int64   // watch creates the processes sent from the cut on, in all and in the busiest second
	ranges, rangesPeak              int64   // Range calls the processes sent from the cut on
	sessionsLost                    int     // lease sessions lost from the cut on
	heldAgainMax                    time.Duration
	relists                         int64   // ours: re-lists after the heal
	maxRelistsPerPrefix             float64 // ours: the most re-lists per prefix of one process
	leaderChanges                   float64
	baselineP99                     time.Duration
	p99Windows                      []time.Duration // 5 s windows from the heal
	p99OKAfter                      time.Duration   // end of the first window ≤ 2× baseline; -1: none
	leasesHeld, leases, owned       int
	registered, regs                int
	writeErrs                       int
	recoveredIn                     time.Duration // from the heal until the scenario saw every subscriber current
}

// runFleetPhase runs one mode's phase: start, count, cut, restore, check.
func runFleetPhase(t *testing.T, run fleetRun) *fleetFigures {
	f := &fleetFigures{procs: run.mix.procs, p99OKAfter: -1}
	ctx := context.Background()
	eps := run.cluster.Endpoints()
	prefix := "/tenants/" + run.tenant + "/"
	r0, err := run.admin.Get(ctx, "fleet-start")
	if err != nil {
		t.Fatal(err)
	}
	hist := followHistory(t, run.admin, prefix, r0.Header.Revision+1)
	for k := range run.mix.keys {
		if _, err := run.admin.Put(ctx, fmt.Sprintf("%sconfig/k%d", prefix, k), "seed"); err != nil {
			t.Fatal(err)
		}
	}
	smp := startSampler(t, eps)
	before := smp.now(t, eps)
	start := time.Now()
	procs, proxies := startFleet(t, run)
	t.Logf("%s: %d processes ready in %v", run.mode, len(procs), time.Since(start).Round(time.Millisecond))
	writer := startFleetWriter(t, run)
	defer writer.close()

	// Server watchers once the gauge holds still for a second.
	settled := smp.now(t, eps)
	for since, deadline := time.Now(), time.Now().Add(20*time.Second); time.Since(since) < time.Second && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		if s := smp.now(t, eps); s.watchers != settled.watchers {
			settled, since = s, time.Now()
		}
	}
	f.serverWatchers = settled.watchers - before.watchers
	f.subs, f.upstreamClient = readyCounts(procs)
	t.Logf("%s: %d subscriptions, %.0f server watchers, settled at %v", run.mode, f.subs, f.serverWatchers, time.Since(start).Round(time.Millisecond))

	// Baseline, the cut, the heal.
	time.Sleep(time.Second)
	base0 := smp.now(t, eps)
	time.Sleep(5 * time.Second)
	base1 := smp.now(t, eps)
	f.baselineP99, _ = p99Between(base0, base1)
	f.watchReqsBase = (base1.watchMsgs - base0.watchMsgs) / base1.at.Sub(base0.at).Seconds()
	f.requestsBase = (base1.count - base0.count) / base1.at.Sub(base0.at).Seconds()
	cutAt := time.Now().UnixNano()
	for _, p := range proxies {
		p.Blackhole()
	}
	time.Sleep(fleetCut)
	rh, err := run.admin.Get(ctx, "fleet-heal")
	if err != nil {
		t.Fatal(err)
	}
	healRev := rh.Header.Revision
	for _, p := range proxies {
		p.Heal()
	}
	heal := time.Now()
	healNs := heal.UnixNano()
	for _, p := range proxies {
		f.linksCut += p.Stats().ResetAtHeal
	}

	// Until every subscriber is current again and etcd's p99 is back within 2×
	// its baseline (or 60 s).
	healEvents := hist.upTo(t, run.admin, healRev)
	targets := map[string]int64{}
	for _, ev := range healEvents {
		targets[string(ev.Kv.Key)] = ev.Kv.ModRevision
	}
	viewTarget := int64(0)
	for k, r := range targets {
		if strings.HasPrefix(k, prefix+"members/api/") {
			viewTarget = max(viewTarget, r)
		}
	}
	lastBehind := "none" // the last subscriber allCurrent found behind, for the log
	allCurrent := func() bool {
		for _, p := range procs {
			if err := p.log.read(); err != nil {
				t.Fatal(err)
			}
			for _, s := range p.log.subs {
				want := targets[s.rng]
				if s.prefix {
					want = viewTarget
				}
				ok, last := false, int64(0)
				for i := len(s.obs) - 1; i >= 0 && !ok; i-- {
					o := s.obs[i]
					ok = o.rev >= want || (o.rev < 0 && o.ns >= healNs)
					last = max(last, o.rev)
				}
				if !ok {
					lastBehind = fmt.Sprintf("%s at revision %d of %d, %d states", s.id, last, want, len(s.obs))
					return false
				}
			}
		}
		return true
	}
	for {
		if f.recoveredIn == 0 && allCurrent() {
			f.recoveredIn = time.Since(heal)
		}
		f.p99Windows, f.p99OKAfter = fleetP99Windows(smp.all(), heal, f.baselineP99)
		if f.recoveredIn > 0 && f.p99OKAfter >= 0 || time.Since(heal) > 60*time.Second {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("%s: every subscriber current %v after the heal (the last behind: %s); p99 windows %v", run.mode, f.recoveredIn.Round(time.Millisecond), lastBehind, f.p99Windows)
	writer.close()
	f.writeErrs = writer.errs
	rf, err := run.admin.Get(ctx, "fleet-final")
	if err != nil {
		t.Fatal(err)
	}
	final := rf.Header.Revision
	events := hist.upTo(t, run.admin, final)
	finalState := map[string]string{}
	for _, ev := range events {
		finalState[string(ev.Kv.Key)] = ev.Type.String()
	}
	// Let the last writes reach every subscriber (its last state checked
	// against etcd's final one below), at most 20 s.
	waitFleetFinal(t, procs, events, run.mode == "peer", final)
	end := smp.now(t, eps)
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() { p.proc.Terminate(10 * time.Second) })
	}
	wg.Wait()
	for _, p := range procs {
		if err := p.log.read(); err != nil {
			t.Fatal(err)
		}
		f.end(p)
	}
	t.Logf("%s: stopped at %v", run.mode, time.Since(start).Round(time.Millisecond))
	f.leaderChanges = end.leaderChanges - before.leaderChanges
	f.serverFigures(smp.all(), heal)
	f.clientFigures(procs, cutAt, healNs, end.at.UnixNano())
	f.check(procs, events, run.mode == "peer", healNs, healRev, final)
	return f
}

// waitFleetFinal waits until every subscriber's last state is etcd's at final,
// at most 20 s (what is still missing then, check reports).
func waitFleetFinal(t *testing.T, procs []*fleetProc, events []*clientv3.Event, peer bool, final int64) {
	hs := map[string]*rangeHistory{}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		done := true
		for _, p := range procs {
			if err := p.log.read(); err != nil {
				t.Fatal(err)
			}
			for _, s := range p.log.subs {
				h, empty := fleetRange(hs, events, s, peer)
				if want, _ := h.stateAt(final, empty); len(s.obs) == 0 || s.obs[len(s.obs)-1].state != want {
					done = false
				}
			}
		}
		if done {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// fleetRange returns the history of s's range (memoised in hs) and its empty
// state.
func fleetRange(hs map[string]*rangeHistory, events []*clientv3.Event, s *fleetSub, peer bool) (*rangeHistory, string) {
	empty := "0"
	if s.prefix {
		empty = fleethash.State(nil)
	}
	h := hs[s.rng]
	if h == nil {
		if s.prefix {
			h = viewHistory(events, s.rng, peer)
		} else {
			h = keyHistory(events, s.rng)
		}
		hs[s.rng] = h
	}
	return h, empty
}

// end reads a terminated process's END line.
func (f *fleetFigures) end(p *fleetProc) {
	out := p.proc.Output()
	i := strings.LastIndex(out, "END ")
	if i < 0 {
		f.msgs = append(f.msgs, p.log.proc+" printed no END line")
		return
	}
	var held, leases, owned, reg, regs, losses int
	fmt.Sscanf(out[i:], "END %d/%d %d %d/%d %d", &held, &leases, &owned, &reg, &regs, &losses)
	f.leasesHeld, f.leases, f.owned, f.registered, f.regs = f.leasesHeld+held, f.leases+leases, f.owned+owned, f.registered+reg, f.regs+regs
	for _, e := range p.log.errs {
		if len(f.msgs) < 6 {
			f.msgs = append(f.msgs, p.log.proc+": "+e)
		}
	}
	if len(p.log.bad) > 0 {
		f.msgs = append(f.msgs, fmt.Sprintf("%s: %d log lines do not parse, first %q", p.log.proc, len(p.log.bad), p.log.bad[0]))
		f.wrong += len(p.log.bad)
	}
}
