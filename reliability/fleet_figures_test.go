package reliability

import (
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// serverFigures computes, from the sampler's scrapes, the Watch stream requests
// per second in the 30 s after the heal: the busiest second and the mean.
func (f *fleetFigures) serverFigures(scrapes []etcdScrape, heal time.Time) {
	var first, last *etcdScrape
	for i := 1; i < len(scrapes); i++ {
		a, b := scrapes[i-1], scrapes[i]
		if b.at.Before(heal) || a.at.After(heal.Add(30*time.Second)) {
			continue
		}
		if first == nil {
			first = &scrapes[i-1]
		}
		last = &scrapes[i]
		if dt := b.at.Sub(a.at).Seconds(); dt > 0.2 {
			f.watchReqsPeak = max(f.watchReqsPeak, (b.watchMsgs-a.watchMsgs)/dt)
			f.requestsPeak = max(f.requestsPeak, (b.count-a.count)/dt)
		}
	}
	if first != nil && last != first {
		secs := last.at.Sub(first.at).Seconds()
		f.watchReqs30s = (last.watchMsgs - first.watchMsgs) / secs
		f.watchReqsExcess = max(0, last.watchMsgs-first.watchMsgs-f.watchReqsBase*secs)
	}
}

// clientFigures computes, from the processes' own counts, what the fleet sent
// etcd from the cut to the end — watch creates (clientv3 resumes its watches
// below its user: only the gRPC stream sees them) and Range calls, in all and in
// the busiest second of the fleet — the watch plane's re-lists (ours), and the
// leases' sessions lost and how long after the heal they were held again.
func (f *fleetFigures) clientFigures(procs []*fleetProc, cut, heal, end int64) {
	creates, ranges := map[int64]int64{}, map[int64]int64{}
	var heldAgain []time.Duration
	for _, p := range procs {
		at, last := p.log.sentAt(cut), p.log.sentAt(end)
		f.creates += last.creates - at.creates
		f.ranges += last.ranges - at.ranges
		prev := at
		for _, s := range p.log.sent {
			if s.ns <= cut || s.ns > end {
				continue
			}
			sec := (s.ns - heal) / int64(time.Second)
			creates[sec] += s.creates - prev.creates
			ranges[sec] += s.ranges - prev.ranges
			prev = s
		}
		if len(p.log.metrics) > 0 {
			m0, m1 := p.log.metricAt(cut), p.log.metricAt(end)
			f.relists += m1.relists - m0.relists
			if m0.up > 0 {
				f.maxRelistsPerPrefix = max(f.maxRelistsPerPrefix, float64(m1.relists-m0.relists)/float64(m0.up))
			}
		}
		lost := false
		for _, s := range p.log.sessions {
			switch {
			case s.ns < cut:
			case !s.held:
				lost = true
				f.sessionsLost++
			case lost && s.ns >= heal:
				heldAgain = append(heldAgain, time.Duration(s.ns-heal))
				lost = false
			}
		}
	}
	for _, n := range creates {
		f.createsPeak = max(f.createsPeak, n)
	}
	for _, n := range ranges {
		f.rangesPeak = max(f.rangesPeak, n)
	}
	f.heldAgainMax = quantile(heldAgain, 1)
}

// check checks every subscriber of every process against etcd's history.
func (f *fleetFigures) check(procs []*fleetProc, events []*clientv3.Event, peer bool, heal, healRev, final int64) {
	hs := map[string]*rangeHistory{}
	var currents []time.Duration
	for _, p := range procs {
		for _, id := range p.log.order {
			s := p.log.subs[id]
			h, empty := fleetRange(hs, events, s, peer)
			v := checkSub(s, h, empty, peer, heal, healRev, final)
			f.checked++
			f.missed += v.missed
			f.duplicated += v.duplicated
			f.reordered += v.reordered
			f.wrong += v.wrong
			if len(f.msgs) < 12 {
				f.msgs = append(f.msgs, v.msgs...)
			}
			if !v.behind {
				continue
			}
			f.behind++
			if v.currentAfter < 0 {
				f.never++
				continue
			}
			currents = append(currents, v.currentAfter)
		}
	}
	f.p50Current, f.p99Current = quantile(currents, 0.5), quantile(currents, 0.99)
	f.maxCurr = quantile(currents, 1)
}

// into records the figures in res's outcome, each name prefixed with who.
func (f *fleetFigures) into(res *coordtest.Result, who string) {
	o := func(name string, v int64) { res.Outcome[who+" "+name] = v }
	o("processes", int64(f.procs))
	o("subscriptions", int64(f.subs))
	o("subscribers checked event by event", int64(f.checked))
	o("server watchers", int64(f.serverWatchers))
	o("subscribers behind at the heal", int64(f.behind))
	o("subscribers never current again", int64(f.never))
	o("current again p50 ms", f.p50Current.Milliseconds())
	o("current again p99 ms", f.p99Current.Milliseconds())
	o("current again max ms", f.maxCurr.Milliseconds())
	o("events missed", int64(f.missed))
	o("events duplicated", int64(f.duplicated))
	o("events out of order", int64(f.reordered))
	o("states etcd never held", int64(f.wrong))
	o("watch requests per s, busiest second after the heal", int64(f.watchReqsPeak))
	o("watch requests per s, 30 s after the heal", int64(f.watchReqs30s))
	o("watch requests per s, baseline", int64(f.watchReqsBase))
	o("watch requests above the baseline in the 30 s after the heal", int64(f.watchReqsExcess))
	o("watch creates sent after the cut", f.creates)
	o("watch creates sent, busiest second", f.createsPeak)
	o("range calls sent after the cut", f.ranges)
	o("range calls sent, busiest second", f.rangesPeak)
	o("re-lists after the cut", f.relists)
	o("re-lists per prefix per process, most x100", int64(f.maxRelistsPerPrefix*100))
	o("etcd requests per s, baseline", int64(f.requestsBase))
	o("etcd requests per s, busiest second after the heal", int64(f.requestsPeak))
	o("leader changes", int64(f.leaderChanges))
	o("etcd request p99 baseline us", f.baselineP99.Microseconds())
	o("etcd request p99 within 2x baseline after ms", f.p99OKAfter.Milliseconds())
	o("leases held at the end", int64(f.leasesHeld))
	o("lease sessions lost", int64(f.sessionsLost))
	o("lease sessions held again after the heal, max ms", f.heldAgainMax.Milliseconds())
	o("registrations registered at the end", int64(f.registered))
}

func (f *fleetFigures) summary() string {
	return fmt.Sprintf("%d subscriptions in %d processes (%d checked), %d upstream watches by the processes' count, %.0f server watchers; "+
		"cut %d links; %d subscribers behind, current again p50 %v p99 %v max %v (%d never); %d missed %d duplicated %d out of order %d wrong; "+
		"watch requests/s baseline %.1f, after the heal busiest %.0f, 30 s mean %.1f (%.0f above the baseline); watch creates sent after the cut %d (busiest second %d), range calls %d (busiest second %d), re-lists %d (most per prefix per process %.2f); "+
		"etcd requests/s baseline %.0f, busiest after the heal %.0f; leader changes %.0f; etcd p99 baseline %v, 5 s windows after the heal %v (≤ 2× after %v); leases held %d/%d (%d sessions lost, held again ≤ %v after the heal), partitions owned %d, registered %d/%d; recovered in %v; writer errors %d",
		f.subs, f.procs, f.checked, f.upstreamClient, f.serverWatchers,
		f.linksCut, f.behind, f.p50Current, f.p99Current, f.maxCurr, f.never, f.missed, f.duplicated, f.reordered, f.wrong,
		f.watchReqsBase, f.watchReqsPeak, f.watchReqs30s, f.watchReqsExcess, f.creates, f.createsPeak, f.ranges, f.rangesPeak, f.relists, f.maxRelistsPerPrefix,
		f.requestsBase, f.requestsPeak, f.leaderChanges, f.baselineP99, f.p99Windows, f.p99OKAfter, f.leasesHeld, f.leases, f.sessionsLost, f.heldAgainMax.Round(time.Millisecond), f.owned, f.registered, f.regs, f.recoveredIn.Round(time.Millisecond), f.writeErrs)
}
