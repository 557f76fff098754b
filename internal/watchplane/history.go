package watchplane

import (
	"sort"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// history is a root's bounded record of recent events, oldest first, for
// subscribers that resume from a revision. It evicts whole revisions (the events
// of one transaction leave together), so every event at a revision at or above
// start is held.
type history struct {
	ring  []*clientv3.Event
	head  int   // index of the oldest event
	n     int   // events held
	start int64 // the lowest revision whose events are all held
}

// newHistory returns an empty history of capacity (at least 1) events.
func newHistory(capacity int) history {
	return history{ring: make([]*clientv3.Event, max(capacity, 1))}
}

// reset empties the history: it holds every event from start on (none yet).
func (h *history) reset(start int64) {
	clear(h.ring)
	h.head, h.n, h.start = 0, 0, start
}

func (h *history) at(i int) *clientv3.Event { return h.ring[(h.head+i)%len(h.ring)] }

// add appends ev, evicting the oldest revision when full.
func (h *history) add(ev *clientv3.Event) {
	if h.n == len(h.ring) {
		rev := h.at(0).Kv.ModRevision
		for h.n > 0 && h.at(0).Kv.ModRevision == rev {
			h.ring[h.head] = nil
			h.head = (h.head + 1) % len(h.ring)
			h.n--
		}
		h.start = max(h.start, rev+1)
	}
	h.ring[(h.head+h.n)%len(h.ring)] = ev
	h.n++
}

// covers reports whether every event at revision from or later is held.
func (h *history) covers(from int64) bool { return from >= h.start }

// since returns the held events at revision from or later for which keep is
// true, oldest first. Call it only when covers(from).
func (h *history) since(from int64, keep func(*clientv3.Event) bool) []*clientv3.Event {
	i := sort.Search(h.n, func(i int) bool { return h.at(i).Kv.ModRevision >= from })
	var out []*clientv3.Event
	for ; i < h.n; i++ {
		if ev := h.at(i); keep(ev) {
			out = append(out, ev)
		}
	}
	return out
}
