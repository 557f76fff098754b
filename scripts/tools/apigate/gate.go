package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// files is the api/ directory: the frozen release files, the open file and
// except.txt, each a set of lines.
type files struct {
	dir      string
	open     string              // the file -w rewrites: next.txt, or the newest v*.txt
	frozen   map[string][]string // older release files, by name
	openSet  []string
	except   []string
	exHeader []string // except.txt's leading # lines, kept by -w
}

func readFiles(dir string) (*files, error) {
	names, err := filepath.Glob(filepath.Join(dir, "v*.txt"))
	if err != nil {
		return nil, err
	}
	sort.Slice(names, func(i, j int) bool { return semverLess(filepath.Base(names[i]), filepath.Base(names[j])) })
	f := &files{dir: dir, frozen: map[string][]string{}}
	if isFile(filepath.Join(dir, "next.txt")) {
		f.open = "next.txt"
	} else if len(names) > 0 {
		f.open = filepath.Base(names[len(names)-1])
	} else {
		return nil, fmt.Errorf("%s has no v*.txt file", dir)
	}
	for _, n := range names {
		b := filepath.Base(n)
		if b == f.open {
			continue
		}
		if f.frozen[b], _, err = readLines(n); err != nil {
			return nil, err
		}
	}
	if f.openSet, _, err = readLines(filepath.Join(dir, f.open)); err != nil {
		return nil, err
	}
	ex := filepath.Join(dir, "except.txt")
	if isFile(ex) {
		if f.except, f.exHeader, err = readLines(ex); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// readLines returns a file's lines but blank and # lines, sorted, and its
// leading # lines.
func readLines(path string) (lines, header []string, err error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := strings.TrimRight(sc.Text(), " \t\r")
		switch {
		case strings.HasPrefix(l, "#"):
			if len(lines) == 0 {
				header = append(header, l)
			}
		case l != "":
			lines = append(lines, l)
		}
	}
	sort.Strings(lines)
	return lines, header, sc.Err()
}

// semverLess orders v0.1.0.txt < v0.2.0.txt < v0.10.0.txt.
func semverLess(a, b string) bool {
	num := func(s string) []int {
		s = strings.TrimSuffix(strings.TrimPrefix(s, "v"), ".txt")
		var out []int
		for _, p := range strings.Split(s, ".") {
			n := 0
			fmt.Sscanf(p, "%d", &n)
			out = append(out, n)
		}
		return out
	}
	return slices.Compare(num(a), num(b)) < 0
}

func set(lines ...[]string) map[string]bool {
	m := map[string]bool{}
	for _, ls := range lines {
		for _, l := range ls {
			m[l] = true
		}
	}
	return m
}

// gate compares the current API with the files and CHANGELOG.md; it returns
// one message per problem.
func gate(cur []string, f *files, changelog string, history []string) []string {
	var problems []string
	curSet := set(cur)
	var frozenLines [][]string
	for _, ls := range f.frozen {
		frozenLines = append(frozenLines, ls)
	}
	frozen := set(frozenLines...)
	except := set(f.except)
	open := set(f.openSet)
	for _, l := range cur {
		if !frozen[l] && !open[l] {
			problems = append(problems, "added, not recorded in api/"+f.open+": "+l)
		}
	}
	for _, l := range f.openSet {
		if !curSet[l] {
			problems = append(problems, "removed or changed, still recorded in api/"+f.open+": "+l)
		}
	}
	for l := range frozen {
		if !curSet[l] && !except[l] {
			problems = append(problems, "removed or changed, not recorded in api/except.txt: "+l)
		}
	}
	for _, l := range history {
		if !curSet[l] && !except[l] {
			problems = append(problems, "dropped from an API file by a commit, not recorded in api/except.txt: "+l)
		}
	}
	sections := changelogSections(changelog)
	exceptTypes := map[string]bool{} // "pkg T" for types removed whole
	for _, l := range f.except {
		if pkg, kind, name, _ := parse(l); kind == "type" && !hasType(curSet, pkg, name) {
			exceptTypes[pkg+" "+name] = true
		}
	}
	for _, l := range f.except {
		pkg, _, name, typ := parse(l)
		if pkg == "" {
			problems = append(problems, "api/except.txt: not an API line: "+l)
			continue
		}
		text := sections[relPath(pkg)]
		ok := mentions(text, name) || (typ != "" && mentions(text, typ))
		if !ok && typ != "" && exceptTypes[pkg+" "+typ] {
			ok = mentions(text, typ)
		}
		if !ok {
			want := name
			if typ != "" {
				want = typ + "." + name + " (or " + typ + ")"
			}
			problems = append(problems, fmt.Sprintf("CHANGELOG.md does not mention %s under ### %s (removed or changed): %s", want, relPath(pkg), l))
		}
	}
	sort.Strings(problems)
	return slices.Compact(problems)
}

func hasType(cur map[string]bool, pkg, name string) bool {
	for l := range cur {
		if p, kind, n, _ := parse(l); p == pkg && kind == "type" && n == name {
			return true
		}
	}
	return false
}

const modulePath = "github.com/coordkit/coordkit"

func relPath(pkg string) string {
	if pkg == modulePath {
		return "."
	}
	return strings.TrimPrefix(pkg, modulePath+"/")
}

var lineRE = regexp.MustCompile(`^pkg ([^,]+), (const|var|func|type|method) (?:\(\*?([A-Za-z0-9_]+)(?:\[[^\]]*\])?\) )?([A-Za-z0-9_]+)(.*)$`)

// memberRE finds the member of "type T[P any] struct, Field X" and "type T
// interface, M(...)" lines (after the name).
var memberRE = regexp.MustCompile(`^(?:\[[^\]]*\])? (?:struct|interface), (.*)$`)

// parse splits an API line into its package, kind, name and — for a method,
// field or interface method — the type it belongs to.
func parse(l string) (pkg, kind, name, typ string) {
	m := lineRE.FindStringSubmatch(l)
	if m == nil {
		return "", "", "", ""
	}
	pkg, kind, name, rest := m[1], m[2], m[4], m[5]
	if kind == "method" {
		return pkg, kind, name, m[3]
	}
	if kind == "type" {
		// type T struct, Field X / type T interface, M(...) / embedded X
		if m := memberRE.FindStringSubmatch(rest); m != nil {
			member := m[1]
			if strings.HasPrefix(member, "embedded ") {
				member = strings.TrimPrefix(member, "embedded ")
				member = strings.TrimPrefix(member, "constraint ")
				member = strings.TrimLeft(member, "*")
				if j := strings.LastIndex(member, "."); j >= 0 {
					member = member[j+1:]
				}
			}
			if j := strings.IndexAny(member, " ([,"); j >= 0 {
				member = member[:j]
			}
			return pkg, "member", member, name
		}
	}
	return pkg, kind, name, ""
}

// changelogSections returns the text under each "### <package>" heading of
// CHANGELOG.md, every release section together, keyed by the package's path
// in the module ("efficiencylock", "correctnesslease/pgfence").
func changelogSections(text string) map[string]string {
	out := map[string]string{}
	cur := ""
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, "### "):
			h := strings.TrimSpace(strings.TrimPrefix(l, "### "))
			h = strings.Trim(h, "`")
			cur = relPath(strings.TrimPrefix(h, "github.com/coordkit/coordkit/"))
			if h == modulePath {
				cur = "."
			}
		case strings.HasPrefix(l, "## ") || strings.HasPrefix(l, "# "):
			cur = ""
		case cur != "":
			out[cur] += l + "\n"
		}
	}
	return out
}

func mentions(text, name string) bool {
	if name == "" {
		return false
	}
	return regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).MatchString(text)
}

// run checks (or with write, regenerates) the API files of the module at root,
// printing problems to w.
func run(root string, write bool, w io.Writer) error {
	cur, err := load(root)
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "api")
	f, err := readFiles(dir)
	if err != nil {
		return err
	}
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		return err
	}
	if write {
		if err := regenerate(cur, f); err != nil {
			return err
		}
		if f, err = readFiles(dir); err != nil {
			return err
		}
	}
	problems := gate(cur, f, string(changelog), history(root))
	for _, p := range problems {
		fmt.Fprintln(w, p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d problems: %w", len(problems), errGate)
	}
	fmt.Fprintf(w, "apigate: %d exported names of %s recorded in api/%s (and %d frozen files), %d removed or changed in api/except.txt, each in CHANGELOG.md\n",
		len(cur), modulePath, f.open, len(f.frozen), len(f.except))
	return nil
}

// regenerate writes the open file (the current API less the frozen files) and
// appends to except.txt every line of the API files that the code lacks.
func regenerate(cur []string, f *files) error {
	curSet := set(cur)
	var frozenLines [][]string
	for _, ls := range f.frozen {
		frozenLines = append(frozenLines, ls)
	}
	frozen := set(frozenLines...)
	var open []string
	for _, l := range cur {
		if !frozen[l] {
			open = append(open, l)
		}
	}
	except := set(f.except)
	for l := range set(append(slices.Clone(f.openSet), keys(frozen)...)) {
		if !curSet[l] {
			except[l] = true
		}
	}
	var ex []string
	for l := range except {
		if !curSet[l] { // a name that came back is no longer an exception
			ex = append(ex, l)
		}
	}
	sort.Strings(ex)
	if err := writeLines(filepath.Join(f.dir, f.open), nil, open); err != nil {
		return err
	}
	header := f.exHeader
	if len(header) == 0 {
		header = []string{"# Lines of the API files that the code no longer has: names removed or changed.", "# Each is named in CHANGELOG.md under its package (### <package>). Appended by apigate -w."}
	}
	return writeLines(filepath.Join(f.dir, "except.txt"), header, ex)
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func writeLines(path string, header, lines []string) error {
	var b strings.Builder
	for _, l := range header {
		b.WriteString(l + "\n")
	}
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
