package reliability

import (
	"fmt"
	"sort"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// subVerdict is what the check of one subscriber's sequence against etcd's
// history found.
type subVerdict struct {
	missed, duplicated, reordered, wrong int
	behind                               bool          // its range changed while its link was cut
	currentAfter                         time.Duration // from the heal until it was given the state etcd had at the heal; -1: never
	msgs                                 []string
}

func (v *subVerdict) fail(counter *int, format string, args ...any) {
	*counter++
	if len(v.msgs) < 3 {
		v.msgs = append(v.msgs, fmt.Sprintf(format, args...))
	}
}

// checkSub checks one subscriber. A key subscriber's state is its key's
// ModRevision and it reports changes: every change must be one of etcd's events
// of the key, each key's changes in increasing revision, none twice, and
// between two states every event of the key must have been reported (perEvent:
// each one, as a clientv3 watch reports them; else the latest, as a failstatic
// snapshot's changes merge per key). A view's state must be etcd's state of the
// prefix at its revision, revisions never going back; a view without revision
// (naming/endpoints) must be a state etcd held at or after the previous one's.
// Every subscriber's last state must be etcd's at final (nothing missed at the
// end). heal and healRev are when the cut ended and etcd's revision then.
func checkSub(s *fleetSub, h *rangeHistory, empty string, perEvent bool, heal, healRev, final int64) subVerdict {
	var v subVerdict
	if len(s.obs) == 0 {
		v.fail(&v.missed, "%s was given no state", s.id)
		v.currentAfter = -1
		return v
	}
	effRev := make([]int64, len(s.obs)) // the revision each state is etcd's state at
	lastChange := map[string]int64{}
	var prev int64 = -1 // revision of the previous state (the init read included)
	var prevDelivered int64 = -1
	cursor := -1 // revless views: index in h.revs of the previous state's match
	for i, o := range s.obs {
		if o.rev < 0 {
			j := cursor
			if j < 0 || h.states[j] != o.state {
				j = -1
				for k := max(cursor, 0); k < len(h.revs); k++ {
					if h.states[k] == o.state {
						j = k
						break
					}
				}
				if j < 0 && !(cursor < 0 && o.state == empty) {
					v.fail(&v.wrong, "%s: state %s is no state etcd held at or after the previous one's (revision %d)", s.id, o.state, revAt(h, cursor))
				}
			}
			if j >= 0 {
				cursor = j
			}
			effRev[i] = revAt(h, cursor)
			continue
		}
		effRev[i] = o.rev
		if want, _ := h.stateAt(o.rev, empty); o.state != want {
			v.fail(&v.wrong, "%s: state %s at revision %d, etcd's was %s", s.id, o.state, o.rev, want)
		}
		if o.init {
			prev = max(prev, o.rev)
			continue
		}
		if o.rev < prevDelivered {
			v.fail(&v.reordered, "%s: revision %d delivered after %d", s.id, o.rev, prevDelivered)
		}
		for _, ch := range o.changes {
			ev := h.events[ch.rev]
			if ev == nil || string(ev.Kv.Key) != ch.key || (ev.Type == mvccpb.DELETE) != ch.del {
				v.fail(&v.wrong, "%s: change %s@%d (delete %v) is no event of etcd's", s.id, ch.key, ch.rev, ch.del)
			}
			switch last := lastChange[ch.key]; {
			case ch.rev == last:
				v.fail(&v.duplicated, "%s: change %s@%d delivered twice", s.id, ch.key, ch.rev)
			case ch.rev < last:
				v.fail(&v.reordered, "%s: change %s@%d delivered after @%d", s.id, ch.key, ch.rev, last)
			default:
				lastChange[ch.key] = ch.rev
			}
		}
		if !s.prefix && prev >= 0 && prev <= o.rev {
			got := map[int64]bool{}
			for _, ch := range o.changes {
				got[ch.rev] = true
			}
			var between []int64
			for _, r := range h.revs {
				if r > prev && r <= o.rev {
					between = append(between, r)
				}
			}
			if perEvent {
				for _, r := range between {
					if !got[r] {
						v.fail(&v.missed, "%s: event at revision %d not delivered between %d and %d", s.id, r, prev, o.rev)
					}
				}
			} else if len(between) > 0 && !got[between[len(between)-1]] {
				v.fail(&v.missed, "%s: the change at revision %d not delivered between %d and %d", s.id, between[len(between)-1], prev, o.rev)
			}
		}
		prev, prevDelivered = max(prev, o.rev), max(prevDelivered, o.rev)
	}
	last := s.obs[len(s.obs)-1]
	if want, _ := h.stateAt(final, empty); last.state != want {
		v.fail(&v.missed, "%s: last state %s, etcd's at the end (revision %d) %s", s.id, last.state, final, want)
	}

	// Current again: given a state at or after the last change of its range up
	// to the heal.
	_, target := h.stateAt(healRev, empty)
	var before int64 = -1
	for i, o := range s.obs {
		if o.ns < heal {
			before = max(before, effRev[i])
		}
	}
	if before >= target {
		return v
	}
	v.behind, v.currentAfter = true, -1
	for i, o := range s.obs {
		if o.ns >= heal && effRev[i] >= target {
			v.currentAfter = time.Duration(o.ns - heal)
			break
		}
	}
	return v
}

func revAt(h *rangeHistory, i int) int64 {
	if i < 0 || i >= len(h.revs) {
		return 0
	}
	return h.revs[i]
}

// quantile returns the q-quantile of ds (nearest rank), 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}
