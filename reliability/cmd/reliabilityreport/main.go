// Command reliabilityreport renders the JSON lines written by the reliability
// scenarios (COORD_RELIABILITY_REPORT) as docs/reliability.md.
//
//	reliabilityreport -in report.jsonl -out ../docs/reliability.md -cmd "scripts/chaos.sh"
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"
	"time"
)

type result struct {
	Scenario string           `json:"scenario"`
	Package  string           `json:"package"`
	Tier     string           `json:"tier"`
	Trials   int              `json:"trials"`
	Faults   map[string]int   `json:"faults"`
	Outcome  map[string]int64 `json:"outcome"`
	Notes    string           `json:"notes"`
	Pass     bool             `json:"pass"`
	Seconds  float64          `json:"seconds"`
	At       time.Time        `json:"at"`
}

func main() {
	in := flag.String("in", "", "JSON lines written by the scenarios")
	out := flag.String("out", "", "markdown file to write")
	cmd := flag.String("cmd", "scripts/chaos.sh", "the command that produced the figures")
	flag.Parse()
	f, err := os.Open(*in)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	var rs []result
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			log.Fatalf("bad line %q: %v", sc.Text(), err)
		}
		rs = append(rs, r)
	}
	if err := sc.Err(); err != nil {
		log.Fatal(err)
	}
	sort.SliceStable(rs, func(i, j int) bool {
		if rs[i].Package != rs[j].Package {
			return rs[i].Package < rs[j].Package
		}
		return rs[i].Scenario < rs[j].Scenario
	})
	var b strings.Builder
	fmt.Fprintf(&b, "# Reliability: the SDK under faults\n\n")
	fmt.Fprintf(&b, "Produced by `%s` on %s (2 cores, loopback servers). Every fault is counted, so a\n", *cmd, time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "scenario whose fault did not happen cannot pass silently. The bounded tier of the same\n")
	fmt.Fprintf(&b, "scenarios runs in every `scripts/test.sh`.\n\n")
	fmt.Fprintf(&b, "| package | scenario | tier | trials | faults injected | outcome | pass | seconds |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		pkg := r.Package
		if pkg == "" {
			pkg = "reliability"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %s | %v | %.1f |\n", pkg, r.Scenario, r.Tier, r.Trials, kv(r.Faults), kv(r.Outcome), r.Pass, r.Seconds)
	}
	for _, r := range rs {
		if r.Notes != "" {
			fmt.Fprintf(&b, "\n**%s.** %s\n", r.Scenario, r.Notes)
		}
	}
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		log.Fatal(err)
	}
}

func kv[V int | int64](m map[string]V) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
