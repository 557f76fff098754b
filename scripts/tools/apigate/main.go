// Command apigate keeps the exported API of coordkit's published packages
// recorded in committed files, as the Go project records its own in
// api/go1.*.txt, and fails when the code and the files disagree:
//
//	go -C scripts/tools run ./apigate      # check (scripts/test.sh runs this)
//	go -C scripts/tools run ./apigate -w   # regenerate after changing an API
//
// The published packages are the root module's non-internal, non-main packages,
// testing/coordtest and testing/fencetest included (they are importable and a
// user's tests use them). The files, in api/ at the repository root:
//
//   - v0.1.0.txt (the newest v*.txt): until api/next.txt exists, the open file:
//     exactly the current API, one line per exported name, field, method and
//     interface method with its signature, sorted. Older v*.txt files are frozen.
//   - next.txt: created when a release is tagged; from then on the open file,
//     holding what was added since the newest v*.txt.
//   - except.txt: every line once recorded that the code no longer has (a
//     removed or changed name). -w appends them; each must be named in
//     CHANGELOG.md under its package's section (### efficiencylock), by its own
//     name or its type's.
//
// The check fails on a name in the code that the open file lacks (added, not
// recorded), a line of the open file the code lacks, a line of a frozen file
// that is neither in the code nor in except.txt, a line of except.txt that
// CHANGELOG.md does not mention, and — when git history is there — a line that a
// commit dropped from an API file without recording it in except.txt. See
// api/README.md.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
)

func main() {
	write := flag.Bool("w", false, "regenerate the open API file and append removed lines to except.txt")
	root := flag.String("root", "", "the module root holding api/ and CHANGELOG.md (default: the coordkit module above the working directory)")
	flag.Parse()
	if *root == "" {
		r, err := findRoot()
		if err != nil {
			fatal(err)
		}
		*root = r
	}
	if err := run(*root, *write, os.Stdout); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "apigate:", err)
	os.Exit(1)
}

// errGate is returned when the check found problems (already printed).
var errGate = errors.New("the exported API and api/*.txt disagree (fix: go -C scripts/tools run ./apigate -w, then name every removed or changed name in CHANGELOG.md)")

// findRoot walks up from the working directory to the directory holding api/
// and a go.mod (the repository root; scripts/tools has a go.mod but no api/).
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isDir(filepath.Join(dir, "api")) && isFile(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no directory with api/ and go.mod above the working directory (use -root)")
		}
		dir = parent
	}
}

func isDir(p string) bool  { st, err := os.Stat(p); return err == nil && st.IsDir() }
func isFile(p string) bool { st, err := os.Stat(p); return err == nil && st.Mode().IsRegular() }

// load returns the exported API of every published package of the module at root.
func load(root string) ([]string, error) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes, Dir: root}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, err
	}
	var lines []string
	var errs []string
	for _, p := range pkgs {
		if !published(p.PkgPath, p.Name) {
			continue
		}
		for _, e := range p.Errors {
			errs = append(errs, e.Error())
		}
		if p.Types != nil {
			lines = append(lines, features(p.Types)...)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("loading the packages: %s", strings.Join(errs, "; "))
	}
	sort.Strings(lines)
	return lines, nil
}

// published reports whether a package of the module is part of its API: not
// main, not internal (at any depth).
func published(path, name string) bool {
	if name == "main" {
		return false
	}
	for _, elem := range strings.Split(path, "/") {
		if elem == "internal" {
			return false
		}
	}
	return true
}
