package main

import (
	"bytes"
	"flag"
	"go/doc/comment"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/effects"
	"github.com/coordkit/coordkit/cmd/coordvet/suite"
)

var update = flag.Bool("update", false, "rewrite the generated part of docs/vet.md from the analyzers' doc.go")

const (
	beginChecks = "<!-- BEGIN GENERATED: the checks, from each analyzer's doc.go (go test ./cmd/coordvet -run TestVetMD -update) -->\n"
	beginTable  = "<!-- BEGIN GENERATED: the table, from internal/effects/table.go (go test ./cmd/coordvet -run TestVetMD -update) -->\n"
	endMarker   = "<!-- END GENERATED -->\n"
)

// replaceBlock replaces the generated block that starts with begin.
func replaceBlock(t *testing.T, md, begin, content string) string {
	t.Helper()
	head, rest, ok1 := strings.Cut(md, begin)
	_, tail, ok2 := strings.Cut(rest, endMarker)
	if !ok1 || !ok2 {
		t.Fatalf("docs/vet.md: generated-section markers %q missing", strings.TrimSpace(begin))
	}
	return head + begin + "\n" + content + "\n" + endMarker + tail
}

// checksMarkdown renders every analyzer's Doc (taken from its doc.go) as a
// section of docs/vet.md, anchored by the analyzer's name.
func checksMarkdown() string {
	var b strings.Builder
	for _, a := range suite.Analyzers() {
		summary, body, _ := strings.Cut(a.Doc, "\n")
		var p comment.Parser
		pr := comment.Printer{HeadingLevel: 3}
		b.WriteString("## " + a.Name + "\n\n")
		b.WriteString("**" + summary + ".**\n\n")
		md := string(bytes.TrimSpace(pr.Markdown(p.Parse(body))))
		md = strings.ReplaceAll(md, "\nBad:\n", "\n**Bad:**\n")
		md = strings.ReplaceAll(md, "\nGood:\n", "\n**Good:**\n")
		b.WriteString(md)
		b.WriteString("\n\n")
	}
	return b.String()
}

// TestVetMD keeps docs/vet.md's per-check sections identical to the analyzers'
// doc.go, the single source of their documentation, and its "What counts"
// table identical to internal/effects/table.go, the one table the checks read.
func TestVetMD(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "vet.md")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	md := string(raw)
	want := replaceBlock(t, md, beginChecks, strings.TrimSuffix(checksMarkdown(), "\n"))
	want = replaceBlock(t, want, beginTable, effects.Markdown())
	if md == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s is out of date with the analyzers' doc.go; run: go test ./cmd/coordvet -run TestVetMD -update (from cmd/coordvet: go test . -run TestVetMD -update)", path)
}

// TestDocsNameEveryCheck makes sure each check's section has a bad and a good
// example and that every diagnostic's link target exists.
func TestDocsNameEveryCheck(t *testing.T) {
	for _, a := range suite.Analyzers() {
		if !strings.Contains(a.Doc, "\nBad:\n") || !strings.Contains(a.Doc, "\nGood:\n") {
			t.Errorf("%s: doc.go has no Bad: and Good: example", a.Name)
		}
		if strings.HasPrefix(a.Doc, a.Name+":") || strings.TrimSpace(a.Doc) == "" {
			t.Errorf("%s: Doc must be the summary and description, without the name", a.Name)
		}
	}
}
