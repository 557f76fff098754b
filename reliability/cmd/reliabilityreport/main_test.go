package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var testManifest = map[scenario][]string{
	{"pkg", "a"}: {"bounded", "full"},
	{"pkg", "b"}: {"bounded", "full"},
	{"pkg", "c"}: {"full"},
}

// good returns the started and finished rows of one passing run of name.
func good(id, name string) []row {
	start := row{ID: id, State: "started", Package: "pkg", Scenario: name, Tier: "full", Declared: []string{"cut"}, Faults: map[string]int{"cut": 0}}
	end := start
	end.State, end.Pass, end.Faults = "finished", true, map[string]int{"cut": 3}
	return []row{start, end}
}

func goodRun() []row {
	var rs []row
	for i, n := range []string{"a", "b", "c"} {
		rs = append(rs, good(string(rune('1'+i)), n)...)
	}
	return rs
}

func TestCheckAcceptsACompleteRun(t *testing.T) {
	rs, problems := check(goodRun(), testManifest, "full")
	if len(problems) != 0 || len(rs) != 3 {
		t.Fatalf("problems %q, %d results", problems, len(rs))
	}
	// The bounded tier does not expect the full-only scenario.
	var bounded []row
	for _, r := range goodRun()[:4] {
		r.Tier = "bounded"
		bounded = append(bounded, r)
	}
	if _, problems := check(bounded, testManifest, "bounded"); len(problems) != 0 {
		t.Fatalf("bounded: %q", problems)
	}
}

func TestCheckRefusesABrokenRun(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func([]row) []row
		want string
	}{
		{"missing", func(rs []row) []row { return rs[2:] }, `pkg: "a": missing`},
		{"duplicated", func(rs []row) []row { return append(rs, good("9", "a")...) }, `pkg: "a": reported 2 times`},
		{"cut short", func(rs []row) []row { return append(rs[:1], rs[2:]...) }, `pkg: "a": cut short`},
		{"fault-free", func(rs []row) []row { rs[1].Faults = map[string]int{"cut": 0}; return rs }, `pkg: "a": declared fault "cut" counted 0`},
		{"no faults declared", func(rs []row) []row { rs[1].Declared, rs[1].Faults = nil, nil; return rs }, `pkg: "a": declares no fault`},
		{"failed", func(rs []row) []row { rs[1].Pass, rs[1].Failures = false, []string{"panicked: boom"}; return rs }, `pkg: "a": failed: panicked: boom`},
		{"unknown", func(rs []row) []row { return append(rs, good("9", "z")...) }, `pkg: "z": not in the manifest`},
		{"other tier", func(rs []row) []row { rs[1].Tier = "bounded"; return rs }, `pkg: "a": ran at tier "bounded"`},
		{"old format", func(rs []row) []row { rs[0].State = ""; return rs }, `state ""`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, problems := check(c.edit(goodRun()), testManifest, "full")
			if !strings.Contains(strings.Join(problems, "\n"), c.want) {
				t.Fatalf("problems %q, want one with %q", problems, c.want)
			}
		})
	}
}

// TestRunWritesNothingOnAProblem: the document is produced only from a run that
// holds up; otherwise the output file is not created.
func TestRunWritesNothingOnAProblem(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "scenarios.tsv")
	write(t, manifest, "# comment\npkg\tboth\ta\npkg\tboth\tb\npkg\tfull\tc\n")
	doc := filepath.Join(dir, "doc.md")
	write(t, doc, "# Reliability\n\nintro\n\n"+beginMarker+"\nold table\n"+endMarker+"\n\n## Mutation testing\nscores\n")

	in := filepath.Join(dir, "report.jsonl")
	out := filepath.Join(dir, "out.md")
	writeRows(t, in, goodRun()[2:]) // "a" missing
	if err := run(in, manifest, "full", doc, out, "chaos", time.Unix(0, 0)); err == nil || !strings.Contains(err.Error(), `"a": missing`) {
		t.Fatalf("run with a missing scenario: %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("output written despite the problem: %v", err)
	}

	writeRows(t, in, goodRun())
	if err := run(in, manifest, "full", doc, out, "chaos", time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if strings.Contains(got, "old table") || !strings.Contains(got, "| pkg | a | full | 0 | cut: 3 |") ||
		!strings.HasPrefix(got, "# Reliability\n\nintro\n") || !strings.HasSuffix(got, endMarker+"\n\n## Mutation testing\nscores\n") {
		t.Fatalf("document:\n%s", got)
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeRows(t *testing.T, path string, rs []row) {
	t.Helper()
	var b strings.Builder
	for _, r := range rs {
		j, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(j, '\n'))
	}
	write(t, path, b.String())
}
