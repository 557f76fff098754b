package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

// row is one line written by coordtest: a scenario's "started" row, then its
// "finished" row with the same id.
type row struct {
	ID       string           `json:"id"`
	State    string           `json:"state"`
	Scenario string           `json:"scenario"`
	Package  string           `json:"package"`
	Tier     string           `json:"tier"`
	Declared []string         `json:"declared"`
	Trials   int              `json:"trials"`
	Faults   map[string]int   `json:"faults"`
	Outcome  map[string]int64 `json:"outcome"`
	Notes    string           `json:"notes"`
	Pass     bool             `json:"pass"`
	Failures []string         `json:"failures"`
	Seconds  float64          `json:"seconds"`
	At       time.Time        `json:"at"`
}

// scenario identifies a scenario: its package and name.
type scenario struct{ pkg, name string }

func (s scenario) String() string { return fmt.Sprintf("%s: %q", s.pkg, s.name) }

func readRows(path string) ([]row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []row
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var r row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		rows = append(rows, r)
	}
	return rows, sc.Err()
}

// readManifest reads "package<TAB>tier<TAB>scenario" lines (# starts a comment)
// and returns, per scenario, the tiers it runs in.
func readManifest(path string) (map[scenario][]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[scenario][]string{}
	for i, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 || f[0] == "" || f[2] == "" {
			return nil, fmt.Errorf("%s:%d: want package<TAB>tier<TAB>scenario, got %q", path, i+1, line)
		}
		var tiers []string
		switch f[1] {
		case "both":
			tiers = []string{"bounded", "full"}
		case "bounded", "full":
			tiers = []string{f[1]}
		default:
			return nil, fmt.Errorf("%s:%d: tier %q, want both, bounded or full", path, i+1, f[1])
		}
		s := scenario{f[0], f[2]}
		if _, dup := m[s]; dup {
			return nil, fmt.Errorf("%s:%d: %v listed twice", path, i+1, s)
		}
		m[s] = tiers
	}
	return m, nil
}

// check pairs started and finished rows and holds the run to the manifest. It
// returns the finished rows (sorted by package and scenario) and every problem
// found; the run is usable only without problems.
func check(rows []row, manifest map[scenario][]string, tier string) ([]row, []string) {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	started := map[string]row{}
	finished := map[string]row{}
	var order []string
	for _, r := range rows {
		switch r.State {
		case "started":
			if _, dup := started[r.ID]; dup {
				add("%v: id %s started twice", scenario{r.Package, r.Scenario}, r.ID)
			}
			started[r.ID] = r
			order = append(order, r.ID)
		case "finished":
			if _, dup := finished[r.ID]; dup {
				add("%v: id %s finished twice", scenario{r.Package, r.Scenario}, r.ID)
			}
			finished[r.ID] = r
		default:
			add("%v: row with state %q (written by an older coordtest?)", scenario{r.Package, r.Scenario}, r.State)
		}
	}
	for id, r := range finished {
		if _, ok := started[id]; !ok {
			add("%v: finished without a started row (id %s)", scenario{r.Package, r.Scenario}, id)
		}
	}

	seen := map[scenario]int{}
	var results []row
	for _, id := range order {
		s := scenario{started[id].Package, started[id].Scenario}
		seen[s]++
		r, ok := finished[id]
		if !ok {
			add("%v: cut short — started at tier %s but never finished (killed by the test timeout, or the process died)", s, started[id].Tier)
			continue
		}
		results = append(results, r)
		if r.Tier != tier {
			add("%v: ran at tier %q, this run is %q", s, r.Tier, tier)
		}
		if !r.Pass {
			add("%v: failed: %s", s, strings.Join(r.Failures, "; "))
		}
		if len(r.Declared) == 0 {
			add("%v: declares no fault", s)
		}
		for _, f := range r.Declared {
			if r.Faults[f] <= 0 {
				add("%v: declared fault %q counted %d", s, f, r.Faults[f])
			}
		}
		if len(r.Faults) == 0 {
			add("%v: no fault counted", s)
		}
		if _, ok := manifest[s]; !ok {
			add("%v: not in the manifest (add it to reliability/scenarios.tsv)", s)
		}
	}
	for s, n := range seen {
		if n > 1 {
			add("%v: reported %d times (one run of each scenario expected)", s, n)
		}
	}
	for s, tiers := range manifest {
		if seen[s] == 0 && slices.Contains(tiers, tier) {
			add("%v: missing — listed in the manifest for tier %s, but no row", s, tier)
		}
	}
	sort.Strings(problems)
	sort.SliceStable(results, func(i, j int) bool {
		if results[i].Package != results[j].Package {
			return results[i].Package < results[j].Package
		}
		return results[i].Scenario < results[j].Scenario
	})
	return results, problems
}
