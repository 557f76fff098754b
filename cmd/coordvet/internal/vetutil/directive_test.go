package vetutil

import "testing"

func TestParseDirective(t *testing.T) {
	for _, c := range []struct {
		text          string
		isDirective   bool
		check, reason string
	}{
		{"//coordvet:ignore dualwrite cache invalidation only", true, "dualwrite", "cache invalidation only"},
		{"//coordvet:ignore dualwrite", true, "dualwrite", ""},
		{"//coordvet:ignore", true, "", ""},
		{"//coordvet:ignore\tsagapivot  two   spaces ", true, "sagapivot", "two spaces"},
		{"//coordvet:ignore fencetoken // trailing comment only", true, "fencetoken", ""},
		{"//coordvet:ignore fencetoken why // and a note", true, "fencetoken", "why"},
		{"//coordvet:ignored fencetoken why", false, "", ""},
		{"// coordvet:ignore fencetoken why", false, "", ""},
		{"/* coordvet:ignore fencetoken why */", false, "", ""},
	} {
		d := parseDirective(c.text)
		if (d != nil) != c.isDirective {
			t.Errorf("%q: directive=%v, want %v", c.text, d != nil, c.isDirective)
			continue
		}
		if d != nil && (d.Check != c.check || d.Reason != c.reason) {
			t.Errorf("%q: check %q reason %q, want %q %q", c.text, d.Check, d.Reason, c.check, c.reason)
		}
	}
}

func TestCovers(t *testing.T) {
	d := &Directive{File: "a.go", Line: 10}
	for line, want := range map[int]bool{9: false, 10: true, 11: true, 12: false} {
		if got := d.covers("a.go", line); got != want {
			t.Errorf("line %d: covers=%v, want %v", line, got, want)
		}
	}
	if d.covers("b.go", 10) {
		t.Error("covers another file")
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
