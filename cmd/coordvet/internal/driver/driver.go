package driver

import (
	"encoding/json"
	"flag"
	"fmt"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/inventory"
)

// Exit codes of the standalone driver.
const (
	ExitClean    = 0
	ExitError    = 1
	ExitFindings = 3 // as x/tools' multichecker
)

// Diag is one diagnostic with resolved positions, deduplicated across a
// package and its test variant.
type Diag struct {
	Check   string
	Posn    token.Position
	End     token.Position
	Message string
	URL     string
	Related []RelatedPos
	Fixes   []Fix
}

// RelatedPos is a related location.
type RelatedPos struct {
	Posn, End token.Position
	Message   string
}

// Fix is a suggested fix with resolved edits.
type Fix struct {
	Message string
	Edits   []Edit
}

// Edit replaces the bytes between Posn and End.
type Edit struct {
	Posn, End token.Position
	NewText   string
}

type triState int

const (
	unset triState = iota
	setTrue
	setFalse
)

func (t *triState) String() string   { return "" }
func (t *triState) IsBoolFlag() bool { return true }
func (t *triState) Set(s string) error {
	switch s {
	case "true", "1":
		*t = setTrue
	case "false", "0":
		*t = setFalse
	default:
		return fmt.Errorf("want true or false")
	}
	return nil
}

// Main runs the standalone driver and returns its exit code.
func Main(analyzers []*analysis.Analyzer, args []string) int {
	fs := flag.CommandLine
	enabled := map[*analysis.Analyzer]*triState{}
	for _, a := range analyzers {
		t := new(triState)
		enabled[a] = t
		fs.Var(t, a.Name, "enable the "+a.Name+" check (alone, with the others given)")
		a.Flags.VisitAll(func(f *flag.Flag) { fs.Var(f.Value, a.Name+"."+f.Name, f.Usage) })
	}
	asJSON := fs.Bool("json", false, "print diagnostics as JSON")
	asSARIF := fs.Bool("sarif", false, "print diagnostics as SARIF 2.1.0")
	inv := fs.Bool("inventory", false, "write the RFC's success metrics for the packages: coordvet-inventory.json and .md in -out, Markdown to stdout")
	out := fs.String("out", ".", "directory -inventory writes to")
	tests := fs.Bool("test", true, "analyze test files too")
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: coordvet [flags] packages\n       coordvet help [check]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return ExitError
	}
	if fs.Arg(0) == "help" {
		return help(analyzers, fs.Args()[1:])
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return ExitError
	}
	run := selectAnalyzers(analyzers, enabled)
	pkgs, err := load(fs.Args(), *tests)
	if err != nil {
		fmt.Fprintln(os.Stderr, "coordvet:", err)
		return ExitError
	}
	var roots []*analysis.Analyzer
	roots = append(roots, run...)
	if *inv {
		roots = append(roots, inventory.New(run))
	}
	graph, err := checker.Analyze(roots, pkgs, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "coordvet:", err)
		return ExitError
	}
	diags, errs := collect(graph)
	for _, e := range errs {
		fmt.Fprintln(os.Stderr, "coordvet:", e)
	}
	if len(errs) > 0 {
		return ExitError
	}
	switch {
	case *inv:
		if err := writeInventory(graph, *out, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "coordvet:", err)
			return ExitError
		}
		return ExitClean
	case *asSARIF:
		if err := writeSARIF(os.Stdout, run, diags); err != nil {
			fmt.Fprintln(os.Stderr, "coordvet:", err)
			return ExitError
		}
	case *asJSON:
		if err := writeJSON(os.Stdout, diags); err != nil {
			fmt.Fprintln(os.Stderr, "coordvet:", err)
			return ExitError
		}
	default:
		for _, d := range diags {
			fmt.Fprintf(os.Stderr, "%s: %s\n", d.Posn, d.Message)
		}
	}
	if len(diags) > 0 {
		return ExitFindings
	}
	return ExitClean
}

func selectAnalyzers(all []*analysis.Analyzer, enabled map[*analysis.Analyzer]*triState) []*analysis.Analyzer {
	var on, notOff []*analysis.Analyzer
	for _, a := range all {
		switch *enabled[a] {
		case setTrue:
			on = append(on, a)
			notOff = append(notOff, a)
		case unset:
			notOff = append(notOff, a)
		}
	}
	if len(on) > 0 {
		return on
	}
	return notOff
}

func help(analyzers []*analysis.Analyzer, names []string) int {
	for _, a := range analyzers {
		if len(names) == 0 {
			summary, _, _ := strings.Cut(a.Doc, "\n")
			fmt.Printf("%-16s %s\n", a.Name, summary)
			continue
		}
		if slices.Contains(names, a.Name) {
			fmt.Printf("%s: %s\n\n%s\n", a.Name, a.Doc, a.URL)
		}
	}
	return ExitClean
}

func load(patterns []string, tests bool) ([]*packages.Package, error) {
	cfg := &packages.Config{Mode: packages.LoadAllSyntax | packages.NeedModule, Tests: tests}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, err
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("%s matched no packages", strings.Join(patterns, " "))
	}
	var msgs []string
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			msgs = append(msgs, e.Error())
		}
	})
	if len(msgs) > 0 {
		return nil, fmt.Errorf("loading packages:\n%s", strings.Join(msgs, "\n"))
	}
	return pkgs, nil
}

// collect returns the roots' diagnostics, deduplicated and sorted by position.
func collect(g *checker.Graph) ([]Diag, []error) {
	var out []Diag
	var errs []error
	seen := map[string]bool{}
	for _, act := range g.Roots {
		if act.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", act.Package.PkgPath, act.Analyzer.Name, act.Err))
			continue
		}
		fset := act.Package.Fset
		for _, d := range act.Diagnostics {
			dd := Diag{Check: d.Category, Posn: fset.Position(d.Pos), Message: d.Message, URL: d.URL}
			if dd.Check == "" {
				dd.Check = act.Analyzer.Name
			}
			if d.End.IsValid() {
				dd.End = fset.Position(d.End)
			}
			for _, r := range d.Related {
				rp := RelatedPos{Posn: fset.Position(r.Pos), Message: r.Message}
				if r.End.IsValid() {
					rp.End = fset.Position(r.End)
				}
				dd.Related = append(dd.Related, rp)
			}
			for _, f := range d.SuggestedFixes {
				fx := Fix{Message: f.Message}
				for _, e := range f.TextEdits {
					fx.Edits = append(fx.Edits, Edit{Posn: fset.Position(e.Pos), End: fset.Position(e.End), NewText: string(e.NewText)})
				}
				dd.Fixes = append(dd.Fixes, fx)
			}
			key := dd.Posn.String() + "\x00" + dd.Message
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, dd)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Posn, out[j].Posn
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		return out[i].Message < out[j].Message
	})
	return out, errs
}

// jsonDiag is the shape go vet -json prints, with end positions and related
// locations.
type jsonDiag struct {
	Category string        `json:"category"`
	Posn     string        `json:"posn"`
	End      string        `json:"end,omitempty"`
	Message  string        `json:"message"`
	URL      string        `json:"url,omitempty"`
	Related  []jsonRelated `json:"related,omitempty"`
	Fixes    []Fix         `json:"suggested_fixes,omitempty"`
}

type jsonRelated struct {
	Posn    string `json:"posn"`
	End     string `json:"end,omitempty"`
	Message string `json:"message"`
}

func writeJSON(w io.Writer, diags []Diag) error {
	list := []jsonDiag{}
	for _, d := range diags {
		j := jsonDiag{Category: d.Check, Posn: d.Posn.String(), Message: d.Message, URL: d.URL, Fixes: d.Fixes}
		if d.End.IsValid() {
			j.End = d.End.String()
		}
		for _, r := range d.Related {
			jr := jsonRelated{Posn: r.Posn.String(), Message: r.Message}
			if r.End.IsValid() {
				jr.End = r.End.String()
			}
			j.Related = append(j.Related, jr)
		}
		list = append(list, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(list)
}

// relPath returns file relative to the working directory when it lies below it.
func relPath(file string) (string, bool) {
	wd, err := os.Getwd()
	if err != nil {
		return file, false
	}
	rel, err := filepath.Rel(wd, file)
	if err != nil || strings.HasPrefix(rel, "..") {
		return file, false
	}
	return filepath.ToSlash(rel), true
}
