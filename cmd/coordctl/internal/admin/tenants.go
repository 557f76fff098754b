package admin

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
)

// The RFC's per-tenant quotas (RFC-COORD-001 MUST 7), unless approved: at most
// 50 MB under /tenants/{tenant}/, 64 KB per value, 200 writes/s; and coord's
// default budget of upstream watches per tenant.
const (
	QuotaTenantBytes  = 50 << 20
	QuotaValueBytes   = coord.DefaultMaxValueBytes
	QuotaWritesPerSec = coord.DefaultWritesPerSecond
	QuotaWatches      = coord.DefaultMaxWatches
)

// WatchesQuery is the PromQL of the tenants view's watches: the upstream etcd
// watches coordkit's processes hold, per tenant (package watchplane's gauge).
const WatchesQuery = `sum by (coordkit_tenant) (coordkit_watchplane_upstream)`

// TenantUsage is one tenant's use of etcd against the quotas. Every figure
// says how it was obtained in Tenants.Sources; one that could not be obtained
// is nil (unknown), never zero.
type TenantUsage struct {
	Tenant       string `json:"tenant"`
	Keys         int64  `json:"keys"`          // measured
	Bytes        int64  `json:"bytes"`         // measured: key + value bytes at the revision read
	LargestValue int64  `json:"largest_value"` // measured
	Leases       int64  `json:"leases"`        // measured: distinct etcd leases its keys are attached to
	// WritesPerSecond is a lower bound: keys created, changed or deleted under
	// the tenant between two reads SampleSeconds apart (several writes to one
	// key count once). nil when not sampled.
	WritesPerSecond *float64 `json:"writes_per_second"`
	// Watches are the upstream etcd watches coordkit's processes report for
	// the tenant (Prometheus); nil when unknown: etcd itself counts watches
	// only for the whole cluster.
	Watches *int64 `json:"watches"`
	// Over names the quotas the tenant exceeds (bytes, value_bytes,
	// writes_per_second, watches).
	Over []string `json:"over,omitempty"`
}

// EtcdHealth is the cluster's health beside the tenants.
type EtcdHealth struct {
	Endpoints []EndpointHealth `json:"endpoints"`
	Leader    *bool            `json:"leader"` // some member reports a leader; nil: no member answered
	Alarms    []string         `json:"alarms"` // NOSPACE, CORRUPT
	// From the members' /metrics (nil when they could not be scraped).
	QuotaBytes      *float64 `json:"quota_bytes"`       // etcd_server_quota_backend_bytes
	DBSizeBytes     *float64 `json:"db_size_bytes"`     // etcd_mvcc_db_total_size_in_bytes, the largest member's
	DBPercentQuota  *float64 `json:"db_percent_quota"`  // of the quota: alert at 70 %, page at 85 %
	LeaderChanges   *float64 `json:"leader_changes"`    // etcd_server_leader_changes_seen_total, since the member started
	WALFsyncP99     *float64 `json:"wal_fsync_p99"`     // seconds, since the member started (the alert uses 5 min rates)
	Watchers        *float64 `json:"watchers"`          // etcd_debugging_mvcc_watcher_total: every client's, cluster-wide
	WritesPerSecond *float64 `json:"writes_per_second"` // measured: the cluster's revision advanced this fast while sampled
	Revision        int64    `json:"revision"`
}

// EndpointHealth is one member as the maintenance API reports it.
type EndpointHealth struct {
	Endpoint  string `json:"endpoint"`
	Version   string `json:"version,omitempty"`
	DBSize    int64  `json:"db_size,omitempty"`
	IsLeader  bool   `json:"is_leader"`
	HasLeader bool   `json:"has_leader"`
	RaftTerm  uint64 `json:"raft_term,omitempty"`
	Error     string `json:"error,omitempty"`
}

// Tenants is `coordctl tenants`: every tenant's keys, bytes, leases, watches
// and write rate against the quotas, and etcd's health beside them.
type Tenants struct {
	At            time.Time         `json:"at"`
	SampleSeconds float64           `json:"sample_seconds"`
	Quotas        map[string]int64  `json:"quotas"`
	Tenants       []TenantUsage     `json:"tenants"`
	Etcd          EtcdHealth        `json:"etcd"`
	Sources       map[string]string `json:"sources"` // how each figure was obtained
	Errors        map[string]string `json:"errors,omitempty"`
}

// tenantSources says how each figure is obtained.
var tenantSources = map[string]string{
	"keys, bytes, largest_value, leases": "measured: every key and value under /tenants/ read at one revision, 1,000 keys per request",
	"writes_per_second (tenant)":         "estimated, a lower bound: keys created, changed or deleted under the tenant between two keys-only reads (several writes to one key count once); etcd counts no writes per prefix",
	"watches (tenant)":                   "reported by coordkit's own processes to Prometheus (" + WatchesQuery + "); watches of other clients are not counted: etcd counts watches only for the whole cluster",
	"writes_per_second (cluster)":        "measured: the cluster revision's advance between the two reads (one per write transaction, every prefix)",
	"etcd health":                        "the maintenance API's Status and AlarmList of every endpoint; quota, DB size, leader changes, WAL fsync and watchers from the members' /metrics",
}

// Tenants reads the tenants' usage and etcd's health; sample is how long
// apart the two reads that estimate write rates are (0: not estimated). Parts
// that could not be read are named in Errors and returned as a *PartialError.
func (a *Admin) Tenants(ctx context.Context, sample time.Duration) (Tenants, error) {
	cli, err := a.etcd(ctx)
	if err != nil {
		return Tenants{}, err
	}
	t := Tenants{At: a.cfg.Now(), SampleSeconds: sample.Seconds(), Sources: tenantSources, Errors: map[string]string{},
		Quotas: map[string]int64{"bytes": QuotaTenantBytes, "value_bytes": QuotaValueBytes, "writes_per_second": QuotaWritesPerSec, "watches": QuotaWatches}}
	first, rev, err := readTenants(ctx, cli, 0, true)
	if err != nil {
		return Tenants{}, err
	}
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	fail := func(part string, err error) { mu.Lock(); t.Errors[part] = err.Error(); mu.Unlock() }
	wg.Go(func() { t.Etcd = a.etcdHealth(ctx, cli, fail) })
	var watches map[string]int64
	if a.cfg.Prometheus != "" {
		wg.Go(func() {
			w, err := promVector(ctx, a.cfg.Prometheus, WatchesQuery, "coordkit_tenant")
			if err != nil {
				fail("watches", err)
			}
			watches = w
		})
	}
	var second map[string]*tenantRead
	var rev2 int64
	if sample > 0 {
		select {
		case <-ctx.Done():
			return Tenants{}, ctx.Err()
		case <-time.After(sample):
		}
		if second, rev2, err = readTenants(ctx, cli, 0, false); err != nil {
			fail("write_rate", err)
		}
	}
	elapsed := time.Since(start).Seconds()
	wg.Wait()
	t.Etcd.Revision = rev
	if second != nil && elapsed > 0 {
		w := float64(rev2-rev) / elapsed
		t.Etcd.WritesPerSecond = &w
	}
	for _, name := range slices.Sorted(mapKeys(first, second)) {
		u := TenantUsage{Tenant: name}
		if f := first[name]; f != nil {
			u.Keys, u.Bytes, u.LargestValue, u.Leases = int64(len(f.mod)), f.bytes, f.largest, int64(len(f.leases))
		}
		if second != nil && elapsed > 0 {
			w := float64(changed(first[name], second[name], rev)) / elapsed
			u.WritesPerSecond = &w
		}
		if n, ok := watches[name]; ok {
			u.Watches = &n
		} else if watches != nil {
			zero := int64(0) // Prometheus answered: no coordkit process reports a watch of the tenant
			u.Watches = &zero
		}
		u.Over = over(u)
		t.Tenants = append(t.Tenants, u)
	}
	if a.cfg.Prometheus == "" {
		t.Sources["watches (tenant)"] = "unknown: no --prometheus to read coordkit's watch gauges from; etcd counts watches only for the whole cluster (etcd.watchers)"
	}
	err = partial(t.Errors)
	if len(t.Errors) == 0 {
		t.Errors = nil
	}
	return t, err
}

func over(u TenantUsage) []string {
	var out []string
	if u.Bytes > QuotaTenantBytes {
		out = append(out, "bytes")
	}
	if u.LargestValue > QuotaValueBytes {
		out = append(out, "value_bytes")
	}
	if u.WritesPerSecond != nil && *u.WritesPerSecond > QuotaWritesPerSec {
		out = append(out, "writes_per_second")
	}
	if u.Watches != nil && *u.Watches > QuotaWatches {
		out = append(out, "watches")
	}
	return out
}

// tenantRead is one tenant's keys at one revision.
type tenantRead struct {
	mod            map[string]int64 // key -> mod revision
	bytes, largest int64
	leases         map[int64]bool
}

// readTenants reads every key under /tenants/ (with values, or keys only) at
// one revision, 1,000 keys per request, grouped by tenant.
func readTenants(ctx context.Context, cli *clientv3.Client, rev int64, values bool) (map[string]*tenantRead, int64, error) {
	const prefix, page = "/tenants/", 1000
	end := clientv3.GetPrefixRangeEnd(prefix)
	out := map[string]*tenantRead{}
	key := prefix
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(page), clientv3.WithRev(rev), clientv3.WithSerializable()}
		if !values {
			opts = append(opts, clientv3.WithKeysOnly())
		}
		resp, err := cli.Get(clientv3.WithRequireLeader(ctx), key, opts...)
		if err != nil {
			return nil, 0, fmt.Errorf("coordctl: read %s: %w", prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			name, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), prefix), "/")
			r := out[name]
			if r == nil {
				r = &tenantRead{mod: map[string]int64{}, leases: map[int64]bool{}}
				out[name] = r
			}
			r.mod[string(kv.Key)] = kv.ModRevision
			r.bytes += int64(len(kv.Key) + len(kv.Value))
			r.largest = max(r.largest, int64(len(kv.Value)))
			if kv.Lease != 0 {
				r.leases[kv.Lease] = true
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, rev, nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// changed counts the keys created or changed after rev, and deleted, between
// two reads of one tenant.
func changed(before, after *tenantRead, rev int64) int {
	n := 0
	if after != nil {
		for _, m := range after.mod {
			if m > rev {
				n++
			}
		}
	}
	if before != nil {
		for k := range before.mod {
			if after == nil || after.mod[k] == 0 {
				n++
			}
		}
	}
	return n
}

func mapKeys(ms ...map[string]*tenantRead) func(func(string) bool) {
	return func(yield func(string) bool) {
		seen := map[string]bool{}
		for _, m := range ms {
			for k := range m {
				if !seen[k] {
					seen[k] = true
					if !yield(k) {
						return
					}
				}
			}
		}
	}
}

// etcdHealth asks every endpoint for its status and the cluster for its
// alarms, and scrapes the members' /metrics.
func (a *Admin) etcdHealth(ctx context.Context, cli *clientv3.Client, fail func(string, error)) EtcdHealth {
	h := EtcdHealth{Endpoints: []EndpointHealth{}, Alarms: []string{}}
	answered := false
	leader := false
	for _, ep := range cli.Endpoints() {
		e := EndpointHealth{Endpoint: ep}
		sctx, cancel := context.WithTimeout(ctx, a.cfg.PartTimeout)
		st, err := cli.Status(sctx, ep)
		cancel()
		if err != nil {
			e.Error = err.Error()
		} else {
			answered = true
			e.Version, e.DBSize, e.RaftTerm = st.Version, st.DbSize, st.RaftTerm
			e.HasLeader, e.IsLeader = st.Leader != 0, st.Leader == st.Header.MemberId
			leader = leader || e.HasLeader
		}
		h.Endpoints = append(h.Endpoints, e)
	}
	if answered {
		h.Leader = &leader
	}
	if al, err := cli.AlarmList(clientv3.WithRequireLeader(ctx)); err != nil {
		fail("etcd alarms", err)
	} else {
		for _, x := range al.Alarms {
			h.Alarms = append(h.Alarms, x.Alarm.String())
		}
	}
	client := a.cfg.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	var metricErrs []string
	for _, u := range a.cfg.EtcdMetrics {
		m, err := scrape(ctx, client, u)
		if err != nil {
			metricErrs = append(metricErrs, err.Error())
			continue
		}
		setMax(&h.QuotaBytes, m, etcdQuotaBytes)
		setMax(&h.DBSizeBytes, m, etcdDBSize)
		setMax(&h.LeaderChanges, m, etcdLeaderChanges)
		setMax(&h.Watchers, m, etcdWatchers)
		if p99, ok := quantile(m, etcdWALFsync, 0.99); ok && (h.WALFsyncP99 == nil || p99 > *h.WALFsyncP99) {
			h.WALFsyncP99 = &p99
		}
	}
	if len(metricErrs) > 0 {
		fail("etcd metrics", fmt.Errorf("%s", strings.Join(metricErrs, "; ")))
	} else if len(a.cfg.EtcdMetrics) == 0 {
		fail("etcd metrics", fmt.Errorf("no metrics URL (--etcd-metrics): quota, DB size against it, fsync and watchers unknown"))
	}
	if h.QuotaBytes != nil && h.DBSizeBytes != nil && *h.QuotaBytes > 0 {
		pct := 100 * *h.DBSizeBytes / *h.QuotaBytes
		h.DBPercentQuota = &pct
	}
	return h
}

// setMax keeps the largest value of name over the members scraped.
func setMax(dst **float64, m map[string][]sample, name string) {
	if v, ok := sum(m, name); ok && (*dst == nil || v > **dst) {
		*dst = &v
	}
}
