package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/naming/endpoints"

	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/reliability/internal/fleethash"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// etcdHistory is etcd's history of one tenant's keys, as a direct watch (not
// through the links the scenario cuts) from before the tenant's first write
// sees it: the reference every subscriber's sequence is checked against.
type etcdHistory struct {
	mu     sync.Mutex
	events []*clientv3.Event
	rev    int64 // every event up to rev is in events
	err    error
	cancel context.CancelFunc
	done   chan struct{}
}

// followHistory watches prefix from revision from on cli until the test ends.
func followHistory(t *testing.T, cli *clientv3.Client, prefix string, from int64) *etcdHistory {
	ctx, cancel := context.WithCancel(context.Background())
	h := &etcdHistory{cancel: cancel, done: make(chan struct{})}
	wch := cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithProgressNotify())
	go func() {
		defer close(h.done)
		for wr := range wch {
			h.mu.Lock()
			if err := wr.Err(); err != nil && h.err == nil {
				h.err = err
			}
			h.events = append(h.events, wr.Events...)
			for _, ev := range wr.Events {
				h.rev = max(h.rev, ev.Kv.ModRevision)
			}
			if wr.IsProgressNotify() {
				h.rev = max(h.rev, wr.Header.Revision)
			}
			h.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-h.done })
	return h
}

// upTo waits until the history holds every event up to rev (asking etcd for
// progress notifications) and returns a copy of it.
func (h *etcdHistory) upTo(t *testing.T, cli *clientv3.Client, rev int64) []*clientv3.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	coordtest.Until(t, 30*time.Second, 100*time.Millisecond, fmt.Sprintf("the history watch at revision %d", rev), func() bool {
		h.mu.Lock()
		reached := h.rev >= rev
		h.mu.Unlock()
		if !reached {
			_ = cli.RequestProgress(ctx)
		}
		return reached
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		t.Fatalf("the history watch failed: %v", h.err)
	}
	return append([]*clientv3.Event(nil), h.events...)
}

// rangeHistory is the history of one subscriber's range: the revisions that
// changed it, and its state after each.
type rangeHistory struct {
	revs   []int64  // ascending
	states []string // state after revs[i]
	// events of the range by revision (a cache's key: one per revision)
	events map[int64]*clientv3.Event
}

// stateAt returns the range's state at rev ("0" or the empty view's hash before
// its first change) and the revision of the last change at or before rev (0: none).
func (r *rangeHistory) stateAt(rev int64, empty string) (string, int64) {
	i := sort.Search(len(r.revs), func(i int) bool { return r.revs[i] > rev })
	if i == 0 {
		return empty, 0
	}
	return r.states[i-1], r.revs[i-1]
}

// keyHistory is the history of one key, its state the key's ModRevision (0:
// absent).
func keyHistory(events []*clientv3.Event, key string) *rangeHistory {
	r := &rangeHistory{events: map[int64]*clientv3.Event{}}
	for _, ev := range events {
		if string(ev.Kv.Key) != key {
			continue
		}
		st := "0"
		if ev.Type == mvccpb.PUT {
			st = strconv.FormatInt(ev.Kv.ModRevision, 10)
		}
		r.revs = append(r.revs, ev.Kv.ModRevision)
		r.states = append(r.states, st)
		r.events[ev.Kv.ModRevision] = ev
	}
	return r
}

// viewHistory is the history of a registry prefix, its state the members'
// stateHash; peer says the values are naming/endpoints records, else
// membership records.
func viewHistory(events []*clientv3.Event, prefix string, peer bool) *rangeHistory {
	r := &rangeHistory{}
	members := map[string]string{}
	for i, ev := range events {
		key := string(ev.Kv.Key)
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		inst := strings.TrimPrefix(key, prefix)
		if ev.Type == mvccpb.DELETE {
			delete(members, inst)
		} else if addr, ok := decodeAddr(ev.Kv.Value, peer); ok {
			members[inst] = addr
		} else {
			delete(members, inst)
		}
		// One state per revision: the last event of a transaction decides.
		if i+1 < len(events) && events[i+1].Kv.ModRevision == ev.Kv.ModRevision {
			continue
		}
		r.revs = append(r.revs, ev.Kv.ModRevision)
		r.states = append(r.states, fleethash.State(members))
	}
	return r
}

func decodeAddr(v []byte, peer bool) (string, bool) {
	if !peer {
		addr, _, ok := membership.DecodeRecord(v)
		return addr, ok
	}
	var ep endpoints.Endpoint
	if err := json.Unmarshal(v, &ep); err != nil {
		return "", false
	}
	return ep.Addr, true
}

// etcdScrape is one reading of every member's /metrics.
type etcdScrape struct {
	at                    time.Time
	watchers, watchMsgs   float64 // watcher gauge; Watch stream messages received (creates, cancels, progress requests)
	leaderChanges, ranges float64
	buckets               map[float64]float64 // etcd_server_request_duration_seconds, cumulative, every type
	count                 float64
	watchStreams          float64
}

// scrapeEtcd reads the figures of every member (summed).
func scrapeEtcd(eps []string) (etcdScrape, error) {
	s := etcdScrape{at: time.Now(), buckets: map[float64]float64{}}
	for _, ep := range eps {
		for name, into := range map[string]*float64{
			"etcd_debugging_mvcc_watcher_total":          &s.watchers,
			"etcd_debugging_mvcc_watch_stream_total":     &s.watchStreams,
			"etcd_server_leader_changes_seen_total":      &s.leaderChanges,
			"etcd_server_request_duration_seconds_count": &s.count,
		} {
			v, _, err := coordtest.EtcdMetric(ep, name)
			if err != nil {
				return s, err
			}
			*into += v
		}
		msgs, err := coordtest.EtcdMetrics(ep, "grpc_server_msg_received_total")
		if err != nil {
			return s, err
		}
		for _, m := range msgs {
			if strings.Contains(m.Labels, `grpc_method="Watch"`) && strings.Contains(m.Labels, `grpc_service="etcdserverpb.Watch"`) {
				s.watchMsgs += m.Value
			}
			if strings.Contains(m.Labels, `grpc_method="Range"`) {
				s.ranges += m.Value
			}
		}
		bs, err := coordtest.EtcdMetrics(ep, "etcd_server_request_duration_seconds_bucket")
		if err != nil {
			return s, err
		}
		for _, b := range bs {
			i := strings.Index(b.Labels, `le="`)
			if i < 0 {
				continue
			}
			le := b.Labels[i+4:]
			le = le[:strings.IndexByte(le, '"')]
			bound := math.Inf(1)
			if le != "+Inf" {
				if bound, err = strconv.ParseFloat(le, 64); err != nil {
					return s, err
				}
			}
			s.buckets[bound] += b.Value
		}
	}
	return s, nil
}

// p99Between is the 99th percentile of etcd's request durations between two
// scrapes, interpolated within its bucket as Prometheus's histogram_quantile
// does (the buckets double: 1, 2, 4 … ms), and the requests counted.
func p99Between(a, b etcdScrape) (time.Duration, float64) {
	bounds := make([]float64, 0, len(b.buckets))
	for le := range b.buckets {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	total := b.buckets[math.Inf(1)] - a.buckets[math.Inf(1)]
	if total <= 0 {
		return 0, 0
	}
	rank, prevBound, prevCount := 0.99*total, 0.0, 0.0
	for _, le := range bounds {
		c := b.buckets[le] - a.buckets[le]
		if c >= rank {
			if math.IsInf(le, 1) {
				return time.Duration(prevBound * float64(time.Second)), total
			}
			frac := (rank - prevCount) / math.Max(c-prevCount, 1e-9)
			return time.Duration((prevBound + (le-prevBound)*frac) * float64(time.Second)), total
		}
		prevBound, prevCount = le, c
	}
	return 0, total
}

// fleetP99Windows cuts scrapes (in time order) into 5 s windows from the heal
// — the first from the last scrape at or before it — and returns each window's
// p99 and when the first within 2× baseline ended, counted from the heal (-1:
// none). A window ends at the first scrape past its 5 s mark, so the windows
// follow the clock whatever the pace of the loop that asks.
func fleetP99Windows(scrapes []etcdScrape, heal time.Time, baseline time.Duration) ([]time.Duration, time.Duration) {
	if len(scrapes) == 0 {
		return nil, -1
	}
	start, next := scrapes[0], 0
	for next < len(scrapes) && !scrapes[next].at.After(heal) {
		start = scrapes[next]
		next++
	}
	var wins []time.Duration
	okAfter := time.Duration(-1)
	for mark := heal.Add(5 * time.Second); ; mark = mark.Add(5 * time.Second) {
		for next < len(scrapes) && scrapes[next].at.Before(mark) {
			next++
		}
		if next == len(scrapes) {
			return wins, okAfter
		}
		end := scrapes[next]
		p99, n := p99Between(start, end)
		wins = append(wins, p99.Round(time.Millisecond))
		if okAfter < 0 && n > 0 && p99 <= 2*baseline {
			okAfter = end.at.Sub(heal)
		}
		start = end
	}
}

// sampler scrapes the members every second until stopped.
type sampler struct {
	mu      sync.Mutex
	scrapes []etcdScrape
	errs    int
	stop    chan struct{}
	done    chan struct{}
}

func startSampler(t *testing.T, eps []string) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			sc, err := scrapeEtcd(eps)
			s.mu.Lock()
			if err != nil {
				s.errs++
			} else {
				s.scrapes = append(s.scrapes, sc)
			}
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *sampler) close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// now returns a fresh scrape (and records it).
func (s *sampler) now(t *testing.T, eps []string) etcdScrape {
	t.Helper()
	sc, err := scrapeEtcd(eps)
	if err != nil {
		t.Fatalf("etcd metrics: %v", err)
	}
	s.mu.Lock()
	s.scrapes = append(s.scrapes, sc)
	s.mu.Unlock()
	return sc
}

func (s *sampler) all() []etcdScrape {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]etcdScrape(nil), s.scrapes...)
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}
