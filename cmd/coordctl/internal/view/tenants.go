package view

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
)

// unknownOr formats a figure that may be unknown.
func unknownOr(p *float64, format string) string {
	if p == nil {
		return "unknown"
	}
	return fmt.Sprintf(format, *p)
}

// Tenants is `tenants`: etcd's health, then each tenant against the quotas,
// then how each figure was obtained.
func Tenants(t admin.Tenants) Doc {
	h := t.Etcd
	leader := "unknown (no endpoint answered)"
	if h.Leader != nil {
		leader = yes(*h.Leader)
	}
	alarms := "none"
	if len(h.Alarms) > 0 {
		alarms = strings.Join(h.Alarms, ", ")
	}
	db := "unknown"
	if h.DBPercentQuota != nil {
		db = fmt.Sprintf("%.1f %% (%.0f of %.0f bytes; alert at 70 %%, page at 85 %%)", *h.DBPercentQuota, *h.DBSizeBytes, *h.QuotaBytes)
	}
	etcd := Section{Title: "ETCD", Fields: [][2]string{{"Leader", leader}, {"Alarms", alarms}, {"DB size of quota", db},
		{"Leader changes (since start)", unknownOr(h.LeaderChanges, "%.0f")}, {"WAL fsync p99 (since start)", unknownOr(h.WALFsyncP99, "%.4f s")},
		{"Watchers (every client)", unknownOr(h.Watchers, "%.0f")}, {"Writes/s (cluster)", unknownOr(h.WritesPerSecond, "%.1f")},
		{"Revision", itoa(h.Revision)}}}
	eps := Section{Header: []string{"ENDPOINT", "VERSION", "DB SIZE", "LEADER", "RAFT TERM", "ERROR"}}
	for _, e := range h.Endpoints {
		l := "no"
		switch {
		case e.IsLeader:
			l = "this member"
		case e.HasLeader:
			l = "yes"
		case e.Error != "":
			l = "?"
		}
		eps.Rows = append(eps.Rows, []string{e.Endpoint, e.Version, itoa(e.DBSize), l, fmt.Sprint(e.RaftTerm), e.Error})
	}
	q := t.Quotas
	ts := Section{Title: fmt.Sprintf("TENANTS (quotas: %d bytes, %d bytes per value, %d writes/s, %d watches)", q["bytes"], q["value_bytes"], q["writes_per_second"], q["watches"]),
		Header: []string{"TENANT", "KEYS", "BYTES", "% QUOTA", "LARGEST VALUE", "LEASES", "WATCHES", "WRITES/S (>=)", "OVER"}, Empty: "no key under /tenants/"}
	for _, u := range t.Tenants {
		watches := "unknown"
		if u.Watches != nil {
			watches = itoa(*u.Watches)
		}
		ts.Rows = append(ts.Rows, []string{u.Tenant, itoa(u.Keys), itoa(u.Bytes), fmt.Sprintf("%.1f", 100*float64(u.Bytes)/float64(q["bytes"])),
			itoa(u.LargestValue), itoa(u.Leases), watches, unknownOr(u.WritesPerSecond, "%.1f"), strings.Join(u.Over, " ")})
	}
	src := Section{Title: "HOW EACH FIGURE IS OBTAINED"}
	for _, k := range slices.Sorted(maps.Keys(t.Sources)) {
		src.Fields = append(src.Fields, [2]string{k, t.Sources[k]})
	}
	return withUnavailable(Doc{etcd, eps, ts, src}, t.Errors)
}
