package main

import (
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// history returns the API lines that a commit dropped from an API file
// (api/v*.txt, api/next.txt) without adding them, in the same commit, to
// except.txt or another API file (a release moving next.txt to v0.2.0.txt).
// It reads git log -p -- api/; without git history (a tarball, a shallow
// clone) it returns nil: the files, not the history, are the record.
func history(root string) []string {
	cmd := exec.Command("git", "log", "--format=commit %H", "-p", "--unified=0", "--no-ext-diff", "--no-renames", "--", "api/")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	return droppedLines(string(out))
}

// droppedLines reads git log -p output (see history).
func droppedLines(log string) []string {
	var dropped []string
	removed, added := map[string]bool{}, map[string]bool{}
	flush := func() {
		for l := range removed {
			if !added[l] {
				dropped = append(dropped, l)
			}
		}
		removed, added = map[string]bool{}, map[string]bool{}
	}
	file := ""
	for _, l := range strings.Split(log, "\n") {
		l = strings.TrimRight(l, " \t\r")
		switch {
		case strings.HasPrefix(l, "commit "):
			flush()
		case strings.HasPrefix(l, "--- "), strings.HasPrefix(l, "+++ "):
			if p := strings.TrimPrefix(l[4:], "a/"); strings.HasPrefix(l, "--- ") && p != "/dev/null" {
				file = filepath.Base(p)
			} else if p := strings.TrimPrefix(l[4:], "b/"); strings.HasPrefix(l, "+++ ") && p != "/dev/null" {
				file = filepath.Base(p)
			}
		case strings.HasPrefix(l, "-pkg "):
			if file != "except.txt" {
				removed[l[1:]] = true
			}
		case strings.HasPrefix(l, "+pkg "):
			added[l[1:]] = true
		}
	}
	flush()
	sort.Strings(dropped)
	return dropped
}
