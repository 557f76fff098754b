package view

import (
	"fmt"
	"strings"
	"time"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
)

// counts is "running 18 · compensating 0 · …" in the order of keys.
func counts(c map[string]int64, keys []string) string {
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, c[k]))
	}
	return strings.Join(parts, " · ")
}

// pager is a page's footer: how many of how many, and how to get the next.
func pager(shown int, total int64, next, noun string) Section {
	f := Section{Fields: [][2]string{{"Showing", fmt.Sprintf("%d of %d %s", shown, total, noun)}}}
	if next != "" {
		f.Fields = append(f.Fields, [2]string{"Next page", "--after " + next})
	}
	return f
}

// SagaPage is `saga list`: the page, then "N of M", the counts per state and
// the next page's --after.
func SagaPage(p admin.SagaPage) Doc {
	d := Sagas(p.Sagas)
	f := pager(len(p.Sagas), p.Total, p.Next, "sagas")
	f.Fields = append(f.Fields, [2]string{"By state", counts(p.Counts, admin.SagaStates)})
	return append(d, f)
}

// ParkedPage is `outbox parked list`: the page, "N of M" and the outbox's
// counts per state.
func ParkedPage(p admin.ParkedPage) Doc {
	d := Parked(p.Events)
	f := pager(len(p.Events), p.Total, p.Next, "parked events")
	f.Fields = append(f.Fields, [2]string{"Outbox", counts(p.Counts, []string{"pending", "parked"})})
	return append(d, f)
}

// Bulk is a bulk change or its preview: what, how many, the version to
// --expect, and the first objects.
func Bulk(c admin.BulkChange) Doc {
	result := "applied"
	if c.DryRun {
		result = "dry run: nothing changed, no audit row written"
	}
	head := Section{Fields: [][2]string{{"Action", c.Action}, {"Selection", c.Target}, {"Rows", itoa(c.Rows)}, {"Version", c.Version}, {"Result", result}}}
	if !c.DryRun {
		head.Fields = append(head.Fields, [2]string{"Audit row", itoa(c.AuditID) + " at " + TS(c.At) + " (one row for all " + itoa(c.Rows) + ")"})
	}
	head.Fields = append(head.Fields, [2]string{"Took", c.Took.Round(time.Millisecond).String()})
	sample := Section{Title: fmt.Sprintf("FIRST %d OF %d", len(c.Sample), c.Rows), Header: []string{"ID", "WHAT", "VERSION", "LAST ERROR"}, Empty: "(none)"}
	for _, v := range c.Sample {
		switch x := v.(type) {
		case admin.ParkedEvent:
			sample.Rows = append(sample.Rows, []string{x.ID, x.Key + " " + x.Type, x.Version, x.LastError})
		case admin.Saga:
			sample.Rows = append(sample.Rows, []string{x.ID, x.Type + " " + x.State + " " + step(x), x.Version, x.LastError})
		}
	}
	return Doc{head, sample}
}
