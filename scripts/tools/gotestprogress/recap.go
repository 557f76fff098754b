package main

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// failStart matches the line that opens a failed top-level test's output in
// plain go test output ("--- FAIL: TestX (1.2s)"). The test's own lines follow
// it, indented, its failed subtests' too; the first line that is not indented
// ends them. panicStart matches a test binary's crash ("panic: …", a timeout's
// too), which prints no FAIL line of a test: its stack follows, unindented, up
// to the package's result line.
// ownLine matches a line a test file itself logged ("    x_test.go:90: …"),
// which a helper's dump (process output, cluster logs) may follow by pages.
var (
	failStart  = regexp.MustCompile(`^--- FAIL: \S+`)
	panicStart = regexp.MustCompile(`^panic: `)
	ownLine    = regexp.MustCompile(`^\s+\S+_test\.go:\d+: `)
)

// Recap bounds: a failed test's output is kept as its first recapHead and last
// recapTail lines and, of those between, the last recapOwn the test file
// itself logged (its errors among them), a crash as the first recapPanic lines of its stack (the
// crashing goroutine's top frames), each cut to recapWidth bytes, so that the
// end of a long CI log says why it failed.
const (
	recapHead  = 2
	recapTail  = 5
	recapOwn   = 8
	recapPanic = 8
	recapWidth = 300
	recapTests = 12
)

// failBlock is one failed test's output, or one crash's, as it is read.
type failBlock struct {
	title string
	crash bool // a panic: the first recapPanic lines of its stack, no tail
	head  []string
	own   []string // the last recapOwn of the test's own lines between head and tail
	tail  []string // the last recapTail lines after head
	more  int      // lines shown nowhere
}

func (b *failBlock) add(line string) {
	line = cut(line, recapWidth)
	headMax := recapHead
	if b.crash {
		headMax = recapPanic
	}
	switch {
	case len(b.head) < headMax:
		b.head = append(b.head, line)
	case b.crash:
		b.more++
	case len(b.tail) < recapTail:
		b.tail = append(b.tail, line)
	default:
		b.between(b.tail[0])
		b.tail = append(b.tail[1:], line)
	}
}

// between keeps a line that left the tail if the test itself logged it.
func (b *failBlock) between(line string) {
	b.more++
	if !ownLine.MatchString(line) {
		return
	}
	if len(b.own) == recapOwn {
		b.own = b.own[1:]
	}
	b.own = append(b.own, line)
}

func (b *failBlock) String() string {
	var s strings.Builder
	s.WriteString(b.title + "\n")
	for _, l := range b.head {
		s.WriteString(l + "\n")
	}
	if hidden := b.more - len(b.own); hidden > 0 {
		fmt.Fprintf(&s, "        … %d more lines …\n", hidden)
	}
	for _, l := range b.own {
		s.WriteString(l + "\n")
	}
	for _, l := range b.tail {
		s.WriteString(l + "\n")
	}
	return s.String()
}

// recapText is the recap of the failed tests' blocks, at most recapTests.
func recapText(blocks []*failBlock) string {
	var s strings.Builder
	for i, b := range blocks {
		if i == recapTests {
			fmt.Fprintf(&s, "… and %d more failed tests (their output is above)\n", len(blocks)-i)
			break
		}
		s.WriteString(b.String())
	}
	return s.String()
}

// recapper follows one stream's lines and hands each failed test's block to
// done when it ends.
type recapper struct {
	open *failBlock
	done func(*failBlock)
}

func (r *recapper) line(line string) {
	switch {
	case failStart.MatchString(line):
		r.flush()
		r.open = &failBlock{title: cut(line, recapWidth)}
	case panicStart.MatchString(line):
		r.flush()
		r.open = &failBlock{title: cut(line, recapWidth), crash: true}
	case r.open == nil:
	case r.open.crash && result.MatchString(line):
		r.flush()
	case r.open.crash:
		if strings.TrimSpace(line) != "" {
			r.open.add(line)
		}
	case strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t"):
		r.open.add(line)
	default:
		r.flush()
	}
}

func (r *recapper) flush() {
	if r.open != nil {
		r.done(r.open)
		r.open = nil
	}
}

// cut shortens s to at most n bytes, on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
