package vetutil

import (
	"testing"
	"time"
)

func TestParseDirective(t *testing.T) {
	for _, c := range []struct {
		text                          string
		isDirective                   bool
		check, owner, expires, reason string
	}{
		{"//coordvet:ignore dualwrite owner=payments expires=2026-09-30 cache invalidation only", true, "dualwrite", "payments", "2026-09-30", "cache invalidation only"},
		{"//coordvet:ignore dualwrite expires=2026-09-30 owner=payments why", true, "dualwrite", "payments", "2026-09-30", "why"},
		{"//coordvet:ignore dualwrite cache invalidation only", true, "dualwrite", "", "", "cache invalidation only"},
		{"//coordvet:ignore dualwrite", true, "dualwrite", "", "", ""},
		{"//coordvet:ignore", true, "", "", "", ""},
		{"//coordvet:ignore\tsagapivot  owner=a   expires=2026-01-01  two   spaces ", true, "sagapivot", "a", "2026-01-01", "two spaces"},
		{"//coordvet:ignore fencetoken owner=a expires=2026-01-01 // trailing comment only", true, "fencetoken", "a", "2026-01-01", ""},
		{"//coordvet:ignore fencetoken owner=a expires=2026-01-01 why // and a note", true, "fencetoken", "a", "2026-01-01", "why"},
		{"//coordvet:ignore fencetoken why owner=a", true, "fencetoken", "", "", "why owner=a"},
		{"//coordvet:ignored fencetoken why", false, "", "", "", ""},
		{"// coordvet:ignore fencetoken why", false, "", "", "", ""},
		{"/* coordvet:ignore fencetoken why */", false, "", "", "", ""},
	} {
		d := ParseDirective(c.text)
		if (d != nil) != c.isDirective {
			t.Errorf("%q: directive=%v, want %v", c.text, d != nil, c.isDirective)
			continue
		}
		if d != nil && (d.Check != c.check || d.Owner != c.owner || d.Expires != c.expires || d.Reason != c.reason) {
			t.Errorf("%q: got %q %q %q %q, want %q %q %q %q", c.text, d.Check, d.Owner, d.Expires, d.Reason, c.check, c.owner, c.expires, c.reason)
		}
	}
}

// TestProblem holds the RFC's exception rule: an owner, an expiry neither past
// nor more than two quarters ahead, and a reason.
func TestProblem(t *testing.T) {
	today := time.Date(2026, 7, 1, 15, 0, 0, 0, time.UTC)
	for text, want := range map[string]string{
		"//coordvet:ignore dualwrite owner=pay expires=2026-07-01 last day":     "",
		"//coordvet:ignore dualwrite owner=pay expires=2027-01-01 at the limit": "",
		"//coordvet:ignore dualwrite owner=pay expires=2027-01-02 too far":      "expires 2027-01-02, more than two quarters ahead (latest 2027-01-01)",
		"//coordvet:ignore dualwrite owner=pay expires=2026-06-30 gone":         "expired on 2026-06-30 (today is 2026-07-01)",
		"//coordvet:ignore dualwrite expires=2026-08-01 no owner":               "has no owner=<team>",
		"//coordvet:ignore dualwrite owner=pay no expiry":                       "has no expires=<YYYY-MM-DD>",
		"//coordvet:ignore dualwrite reason only":                               "has no owner=<team>, no expires=<YYYY-MM-DD>",
		"//coordvet:ignore dualwrite owner=pay expires=2026-08-01":              "has no reason",
		"//coordvet:ignore dualwrite owner=pay expires=01/08/2026 why":          "has expires=01/08/2026, not a YYYY-MM-DD date",
	} {
		if got := ParseDirective(text).Problem(today); got != want {
			t.Errorf("%q: Problem = %q, want %q", text, got, want)
		}
	}
}

func TestCovers(t *testing.T) {
	d := &Directive{File: "a.go", Line: 10}
	for line, want := range map[int]bool{9: false, 10: true, 11: true, 12: false} {
		if got := d.Covers("a.go", line); got != want {
			t.Errorf("line %d: covers=%v, want %v", line, got, want)
		}
	}
	if d.Covers("b.go", 10) {
		t.Error("covers another file")
	}
}

func TestMessageBound(t *testing.T) {
	long := ""
	for range 50 {
		long += "word "
	}
	m := Message("dualwrite", long, "enqueue the event with outbox EnqueueTx in the same transaction")
	if n := len([]rune(m)); n > MaxMessage {
		t.Fatalf("message of %d characters: %s", n, m)
	}
	if Nearest("dualwrites") != "dualwrite" || Nearest("fencetokn") != "fencetoken" || Nearest("zzz") != "" {
		t.Error("Nearest")
	}
}

func TestDocExtraction(t *testing.T) {
	src := "// Package x does x.\n//\n// # Analyzer x\n//\n// x: summary\n//\n// Body.\n//\n// # Other\n//\n// Not this.\npackage x\n"
	if got, want := Doc(src, "x"), "summary\n\nBody."; got != want {
		t.Fatalf("Doc = %q, want %q", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Doc without the heading did not panic")
		}
	}()
	Doc("// Package x.\npackage x\n", "x")
}

func TestPackagePredicates(t *testing.T) {
	for path, want := range map[string]bool{
		"github.com/coordkit/coordkit":               true,
		"github.com/coordkit/coordkit/saga":          true,
		"github.com/coordkit/coordkit/saga_test":     true,
		"github.com/coordkit/coordkitx":              false,
		"github.com/coordkit/coordkit-fork/saga":     false,
		"example.com/github.com/coordkit/coordkit/x": false,
	} {
		if got := IsSDK(path); got != want {
			t.Errorf("IsSDK(%q) = %v, want %v", path, got, want)
		}
	}
	if !UnderPackage(SDK+"/outbox/kafka", SDK+"/outbox") || !UnderPackage(SDK+"/outbox_test", SDK+"/outbox") || UnderPackage(SDK+"/outboxes", SDK+"/outbox") {
		t.Error("UnderPackage")
	}
	if !IsPackage(SDK+"/saga_test", SDK+"/saga") || IsPackage(SDK+"/saga/x", SDK+"/saga") {
		t.Error("IsPackage")
	}
}
