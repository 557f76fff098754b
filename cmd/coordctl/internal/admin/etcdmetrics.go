package admin

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The etcd server metrics the tenants view reads (and deploy/prometheus's etcd
// rules alert on: deploy's test holds both to a running etcd's /metrics).
const (
	etcdHasLeader     = "etcd_server_has_leader"
	etcdLeaderChanges = "etcd_server_leader_changes_seen_total"
	etcdQuotaBytes    = "etcd_server_quota_backend_bytes"
	etcdDBSize        = "etcd_mvcc_db_total_size_in_bytes"
	etcdWatchers      = "etcd_debugging_mvcc_watcher_total"
	etcdWALFsync      = "etcd_disk_wal_fsync_duration_seconds"
)

// sample is one scraped series: its labels and value.
type sample struct {
	labels map[string]string
	value  float64
}

// scrape reads a Prometheus text exposition into series by name.
func scrape(ctx context.Context, client *http.Client, url string) (map[string][]sample, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return parseExposition(io.LimitReader(resp.Body, 64<<20))
}

// parseExposition reads the text format's samples (comments skipped; label
// values without escaped quotes, which etcd's metrics do not have).
func parseExposition(r io.Reader) (map[string][]sample, error) {
	out := map[string][]sample{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		labels := map[string]string{}
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			name, rest = line[:i], strings.TrimSpace(line[j+1:])
			for _, kv := range strings.Split(line[i+1:j], ",") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					labels[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"`)
				}
			}
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			name, rest = line[:i], strings.TrimSpace(line[i+1:])
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		out[name] = append(out[name], sample{labels: labels, value: v})
	}
	return out, sc.Err()
}

// sum adds every series of name; ok false when there is none.
func sum(m map[string][]sample, name string) (float64, bool) {
	ss, ok := m[name]
	total := 0.0
	for _, s := range ss {
		total += s.value
	}
	return total, ok
}

// quantile estimates a histogram's q-quantile from its cumulative buckets
// (linear within the bucket, as Prometheus's histogram_quantile does).
func quantile(m map[string][]sample, name string, q float64) (float64, bool) {
	type bucket struct{ le, n float64 }
	byLE := map[float64]float64{}
	for _, s := range m[name+"_bucket"] {
		le, err := strconv.ParseFloat(s.labels["le"], 64)
		if err == nil {
			byLE[le] += s.value
		}
	}
	if len(byLE) == 0 {
		return 0, false
	}
	var bs []bucket
	for le, n := range byLE {
		bs = append(bs, bucket{le, n})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	total := bs[len(bs)-1].n
	if total == 0 {
		return 0, false
	}
	rank, lower, below := q*total, 0.0, 0.0
	for _, b := range bs {
		if b.n >= rank {
			if math.IsInf(b.le, 1) {
				return lower, true
			}
			if b.n == below {
				return b.le, true
			}
			return lower + (b.le-lower)*(rank-below)/(b.n-below), true
		}
		lower, below = b.le, b.n
	}
	return lower, true
}
