package driver

import (
	"encoding/json"
	"fmt"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/tools/go/analysis/checker"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/inventory"
)

// Report is the -inventory output: the RFC's success metrics (RFC-COORD-001,
// "Success metrics") for the packages read, and the lists they count.
type Report struct {
	Metrics         Metrics        `json:"metrics"`
	Leases          []LeaseRow     `json:"correctness_leases"`
	EfficiencyLocks []LockRow      `json:"efficiency_locks"`
	HandRolled      []FindingRow   `json:"hand_rolled_locks"`
	DualWrites      []FindingRow   `json:"dual_writes"`
	OutboxEnqueues  []string       `json:"outbox_enqueues"`
	Handlers        []HandlerRow   `json:"handlers"`
	Sagas           []SagaRow      `json:"sagas"`
	Exceptions      []ExceptionRow `json:"exceptions"`
	ByOwner         []OwnerRow     `json:"exceptions_by_owner"`
}

// Metrics are the counts of the RFC's success metrics.
type Metrics struct {
	Leases               int `json:"correctness_leases"`
	LeasesWithoutFence   int `json:"correctness_leases_without_fence"`
	EfficiencyLocks      int `json:"efficiency_locks"`
	LocksWithoutReason   int `json:"efficiency_locks_without_reason"`
	HandRolled           int `json:"hand_rolled_locks"`
	HandRolledExcepted   int `json:"hand_rolled_locks_under_exception"`
	DualWrites           int `json:"dual_writes"`
	DualWritesExcepted   int `json:"dual_writes_under_exception"`
	OutboxEnqueues       int `json:"outbox_enqueues"`
	MutatingHandlers     int `json:"mutating_handlers"`
	IdempotentHandlers   int `json:"idempotent_mutating_handlers"`
	Sagas                int `json:"sagas"`
	SagasWithoutOnePivot int `json:"sagas_without_one_pivot"`
	Exceptions           int `json:"exceptions"`
	ExceptionsNotValid   int `json:"exceptions_invalid_or_expired"`
}

// LeaseRow is one correctness lease (or leader-loop callback).
type LeaseRow struct {
	Pos    string `json:"pos"`
	Name   string `json:"name,omitempty"`
	Via    string `json:"via"`
	Fenced bool   `json:"reaches_fence"`
}

// LockRow is one efficiency lock.
type LockRow struct {
	Pos      string `json:"pos"`
	Reason   string `json:"reason"`
	Declared bool   `json:"declared"`
}

// FindingRow is one finding, and the exception that covers it, if any.
type FindingRow struct {
	Pos       string `json:"pos"`
	Message   string `json:"message"`
	Exception string `json:"exception,omitempty"`
}

// HandlerRow is one HTTP or gRPC handler.
type HandlerRow struct {
	Pos        string `json:"pos"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Method     string `json:"method,omitempty"`
	Mutating   bool   `json:"mutating"`
	Why        string `json:"why,omitempty"`
	Idempotent bool   `json:"idempotent"`
}

// SagaRow is one literal saga definition.
type SagaRow struct {
	Pos   string `json:"pos"`
	Name  string `json:"name,omitempty"`
	Pivot string `json:"pivot,omitempty"`
	OK    bool   `json:"one_pivot"`
}

// ExceptionRow is one //coordvet:ignore directive.
type ExceptionRow struct {
	Pos     string `json:"pos"`
	Check   string `json:"check"`
	Owner   string `json:"owner,omitempty"`
	Expires string `json:"expires,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Status  string `json:"status"` // "valid", or what makes it no exception
}

// OwnerRow counts exceptions per owner.
type OwnerRow struct {
	Owner   string `json:"owner"`
	Valid   int    `json:"valid"`
	Invalid int    `json:"invalid_or_expired"`
	Next    string `json:"next_expiry,omitempty"`
}

func writeInventory(g *checker.Graph, dir string, md io.Writer) error {
	rep := buildReport(g)
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	mdText := rep.Markdown()
	if err := os.WriteFile(filepath.Join(dir, "coordvet-inventory.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "coordvet-inventory.md"), []byte(mdText), 0o644); err != nil {
		return err
	}
	_, err = io.WriteString(md, mdText)
	return err
}

func pos(fset *token.FileSet, p token.Pos) string {
	posn := fset.Position(p)
	file, _ := relPath(posn.Filename)
	return fmt.Sprintf("%s:%d", file, posn.Line)
}

// buildReport merges the packages' inventories (a package and its test
// variant share files: rows are deduplicated by position) in sorted order.
func buildReport(g *checker.Graph) *Report {
	rep := &Report{}
	seen := map[string]bool{}
	once := func(key string) bool {
		if seen[key] {
			return false
		}
		seen[key] = true
		return true
	}
	for _, act := range g.Roots {
		p, ok := act.Result.(*inventory.Package)
		if !ok || p == nil {
			continue
		}
		for _, f := range p.Findings {
			for _, it := range f.Items {
				at := pos(p.Fset, it.Pos)
				if !once(it.Kind + at + it.Detail) {
					continue
				}
				switch it.Kind {
				case "lease":
					rep.Leases = append(rep.Leases, LeaseRow{Pos: at, Name: it.Name, Via: it.Detail, Fenced: it.OK})
				case "efficiencylock":
					rep.EfficiencyLocks = append(rep.EfficiencyLocks, LockRow{Pos: at, Reason: it.Detail, Declared: it.OK})
				case "saga":
					rep.Sagas = append(rep.Sagas, SagaRow{Pos: at, Name: it.Name, Pivot: it.Detail, OK: it.OK})
				}
			}
			for _, r := range f.List {
				row := FindingRow{Pos: pos(p.Fset, r.Pos), Message: r.Message}
				if r.Exception != nil {
					row.Exception = fmt.Sprintf("owner=%s expires=%s", r.Exception.Owner, r.Exception.Expires)
				}
				switch f.Check {
				case "pavedroad":
					if once("hr" + row.Pos + row.Message) {
						rep.HandRolled = append(rep.HandRolled, row)
					}
				case "dualwrite":
					if once("dw" + row.Pos + row.Message) {
						rep.DualWrites = append(rep.DualWrites, row)
					}
				}
			}
		}
		for _, e := range p.Enqueues {
			if at := pos(p.Fset, e); once("ob" + at) {
				rep.OutboxEnqueues = append(rep.OutboxEnqueues, at)
			}
		}
		for _, h := range p.Handlers {
			if at := pos(p.Fset, h.Pos); once("h" + at) {
				rep.Handlers = append(rep.Handlers, HandlerRow{Pos: at, Kind: h.Kind, Name: h.Name, Method: h.Method, Mutating: h.Mutating, Why: h.Why, Idempotent: h.Idempotent})
			}
		}
		for _, e := range p.Except.All {
			at := pos(p.Fset, e.Pos)
			if !once("ex" + at) {
				continue
			}
			status := "valid"
			if e.Problem != "" {
				status = e.Problem
			}
			rep.Exceptions = append(rep.Exceptions, ExceptionRow{Pos: at, Check: e.Check, Owner: e.Owner, Expires: e.Expires, Reason: e.Reason, Status: status})
		}
	}
	byPos := func(key func(int) string) func(i, j int) bool {
		return func(i, j int) bool { return sortKey(key(i)) < sortKey(key(j)) }
	}
	sort.Slice(rep.Leases, byPos(func(i int) string { return rep.Leases[i].Pos + "|" + rep.Leases[i].Via }))
	sort.Slice(rep.EfficiencyLocks, byPos(func(i int) string { return rep.EfficiencyLocks[i].Pos }))
	sort.Slice(rep.HandRolled, byPos(func(i int) string { return rep.HandRolled[i].Pos + "|" + rep.HandRolled[i].Message }))
	sort.Slice(rep.DualWrites, byPos(func(i int) string { return rep.DualWrites[i].Pos + "|" + rep.DualWrites[i].Message }))
	sort.Slice(rep.OutboxEnqueues, byPos(func(i int) string { return rep.OutboxEnqueues[i] }))
	sort.Slice(rep.Handlers, byPos(func(i int) string { return rep.Handlers[i].Pos }))
	sort.Slice(rep.Sagas, byPos(func(i int) string { return rep.Sagas[i].Pos }))
	sort.Slice(rep.Exceptions, byPos(func(i int) string { return rep.Exceptions[i].Pos }))

	m := &rep.Metrics
	m.Leases = len(rep.Leases)
	m.LeasesWithoutFence = count(rep.Leases, func(l LeaseRow) bool { return !l.Fenced })
	m.EfficiencyLocks = len(rep.EfficiencyLocks)
	m.LocksWithoutReason = count(rep.EfficiencyLocks, func(l LockRow) bool { return !l.Declared })
	m.OutboxEnqueues = len(rep.OutboxEnqueues)
	m.HandRolledExcepted = count(rep.HandRolled, excepted)
	m.HandRolled = len(rep.HandRolled) - m.HandRolledExcepted
	m.DualWritesExcepted = count(rep.DualWrites, excepted)
	m.DualWrites = len(rep.DualWrites) - m.DualWritesExcepted
	for _, h := range rep.Handlers {
		if h.Mutating {
			m.MutatingHandlers++
			if h.Idempotent {
				m.IdempotentHandlers++
			}
		}
	}
	m.Sagas = len(rep.Sagas)
	m.SagasWithoutOnePivot = count(rep.Sagas, func(s SagaRow) bool { return !s.OK })
	m.Exceptions = len(rep.Exceptions)
	owners := map[string]*OwnerRow{}
	for _, e := range rep.Exceptions {
		owner := e.Owner
		if owner == "" {
			owner = "(none)"
		}
		o := owners[owner]
		if o == nil {
			o = &OwnerRow{Owner: owner}
			owners[owner] = o
		}
		if e.Status == "valid" {
			o.Valid++
			if o.Next == "" || e.Expires < o.Next {
				o.Next = e.Expires
			}
		} else {
			o.Invalid++
			m.ExceptionsNotValid++
		}
	}
	for _, o := range owners {
		rep.ByOwner = append(rep.ByOwner, *o)
	}
	sort.Slice(rep.ByOwner, func(i, j int) bool { return rep.ByOwner[i].Owner < rep.ByOwner[j].Owner })
	return rep
}

// count returns how many of rows holds.
func count[T any](rows []T, holds func(T) bool) int {
	n := 0
	for _, r := range rows {
		if holds(r) {
			n++
		}
	}
	return n
}

// excepted reports whether an exception silences f.
func excepted(f FindingRow) bool { return f.Exception != "" }

// Markdown renders the metrics table and the lists behind it.
func (r *Report) Markdown() string {
	var b strings.Builder
	m := r.Metrics
	share := "n/a"
	if m.MutatingHandlers > 0 {
		share = fmt.Sprintf("%d %%", 100*m.IdempotentHandlers/m.MutatingHandlers)
	}
	b.WriteString("# coordvet inventory (RFC-COORD-001 success metrics)\n\n")
	b.WriteString("| metric | value | target |\n| --- | --- | --- |\n")
	fmt.Fprintf(&b, "| correctness leases without a fence | %d of %d | 0 |\n", m.LeasesWithoutFence, m.Leases)
	fmt.Fprintf(&b, "| efficiency locks without a stated reason | %d of %d | 0 |\n", m.LocksWithoutReason, m.EfficiencyLocks)
	fmt.Fprintf(&b, "| hand-rolled locks and elections | %d (and %d under exception) | trending to 0 |\n", m.HandRolled, m.HandRolledExcepted)
	fmt.Fprintf(&b, "| dual writes | %d (and %d under exception) | 0 |\n", m.DualWrites, m.DualWritesExcepted)
	fmt.Fprintf(&b, "| outbox enqueues | %d | — |\n", m.OutboxEnqueues)
	fmt.Fprintf(&b, "| mutating handlers with idempotency | %d of %d (%s) | 100 %% external, 90 %% internal |\n", m.IdempotentHandlers, m.MutatingHandlers, share)
	fmt.Fprintf(&b, "| sagas without exactly one pivot | %d of %d | 0 |\n", m.SagasWithoutOnePivot, m.Sagas)
	fmt.Fprintf(&b, "| exceptions invalid or expired | %d of %d | 0 |\n", m.ExceptionsNotValid, m.Exceptions)
	section := func(title string, header string, rows []string) {
		fmt.Fprintf(&b, "\n## %s\n\n", title)
		if len(rows) == 0 {
			b.WriteString("none\n")
			return
		}
		b.WriteString(header)
		for _, row := range rows {
			b.WriteString(row + "\n")
		}
	}
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "**no**"
	}
	var rows []string
	for _, l := range r.Leases {
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s |", l.Pos, cell(l.Name), cell(l.Via), yes(l.Fenced)))
	}
	section("Correctness leases", "| where | name | via | reaches a fence |\n| --- | --- | --- | --- |\n", rows)
	rows = nil
	for _, l := range r.EfficiencyLocks {
		rows = append(rows, fmt.Sprintf("| %s | %s | %s |", l.Pos, cell(l.Reason), yes(l.Declared)))
	}
	section("Efficiency locks", "| where | stated reason | declared |\n| --- | --- | --- |\n", rows)
	for _, s := range []struct {
		title string
		list  []FindingRow
	}{{"Hand-rolled locks and elections", r.HandRolled}, {"Dual writes", r.DualWrites}} {
		rows = nil
		for _, f := range s.list {
			rows = append(rows, fmt.Sprintf("| %s | %s | %s |", f.Pos, cell(f.Message), cell(f.Exception)))
		}
		section(s.title, "| where | finding | exception |\n| --- | --- | --- |\n", rows)
	}
	rows = nil
	for _, h := range r.Handlers {
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s |", h.Pos, h.Kind, cell(h.Name), cell(h.Method), cell(map[bool]string{true: "yes: " + h.Why, false: "no"}[h.Mutating]), yes(h.Idempotent || !h.Mutating)))
	}
	section("Handlers", "| where | kind | name | method | mutating | idempotent (or read-only) |\n| --- | --- | --- | --- | --- | --- |\n", rows)
	fmt.Fprintf(&b, "\n## Outbox enqueues\n\n%d call sites\n", len(r.OutboxEnqueues))
	rows = nil
	for _, s := range r.Sagas {
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s |", s.Pos, cell(s.Name), cell(s.Pivot), yes(s.OK)))
	}
	section("Sagas", "| where | name | pivot | exactly one pivot |\n| --- | --- | --- | --- |\n", rows)
	rows = nil
	for _, e := range r.Exceptions {
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s |", e.Pos, cell(e.Check), cell(e.Owner), cell(e.Expires), cell(e.Status)))
	}
	section("Exceptions", "| where | check | owner | expires | status |\n| --- | --- | --- | --- | --- |\n", rows)
	rows = nil
	for _, o := range r.ByOwner {
		rows = append(rows, fmt.Sprintf("| %s | %d | %d | %s |", cell(o.Owner), o.Valid, o.Invalid, cell(o.Next)))
	}
	section("Exceptions by owner", "| owner | valid | invalid or expired | next expiry |\n| --- | --- | --- | --- |\n", rows)
	return b.String()
}

// sortKey orders "file:line..." by file, then line as a number.
func sortKey(pos string) string {
	file, rest, _ := strings.Cut(pos, ":")
	line, tail, _ := strings.Cut(rest, "|")
	if n, err := strconv.Atoi(line); err == nil {
		return fmt.Sprintf("%s\x00%09d|%s", file, n, tail)
	}
	return pos
}

func cell(s string) string {
	if s == "" {
		return "—"
	}
	return strings.NewReplacer("|", "\\|", "\n", " ").Replace(s)
}
