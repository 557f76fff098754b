package coordkit_test

import (
	"os"
	"path"
	"slices"
	"strings"
	"testing"
)

// conventions runs every rule over ps and returns the violations.
func conventions(ps []*pkg) []string {
	configErr := map[string]bool{}
	for _, p := range ps {
		for _, f := range p.files {
			if f.Scope.Lookup("ConfigError") != nil {
				configErr[p.importPath] = true
			}
		}
	}
	var bad []string
	for _, p := range ps {
		bad = append(bad, checkImports(p)...)
		if !p.library() && !strings.HasPrefix(strings.TrimPrefix(p.importPath, modulePath+"/"), "testing/") {
			continue // cmd/: layering only
		}
		bad = append(bad, checkDocs(p)...)
		bad = append(bad, checkConfigs(p, configErr[path.Dir(p.importPath)])...)
		bad = append(bad, checkMigrations(p)...)
		bad = append(bad, checkDocExamples(p)...)
		bad = append(bad, checkDBVocabulary(p)...)
		bad = append(bad, checkPackageComment(p)...)
		bad = append(bad, checkConfigByValue(p)...)
		bad = append(bad, checkPackageState(p)...)
		if p.library() {
			bad = append(bad, checkMetrics(p)...)
		}
	}
	slices.Sort(bad)
	return bad
}

// TestConventions: the repository keeps the house rules.
func TestConventions(t *testing.T) {
	for _, v := range conventions(modulePkgs(t)) {
		t.Error(v)
	}
}

// TestConventionsCatchViolations: a fixture that breaks each rule once is caught
// once per rule — a conventions test that cannot fail holds nothing.
func TestConventionsCatchViolations(t *testing.T) {
	fixture := loadPkg(t, "testdata/conventions/badfeature", modulePath+"/badfeature")
	got := strings.Join(conventions([]*pkg{fixture}), "\n")
	wantCaught(t, got,
		"imports "+modulePath+"/outbox: a feature package never imports a sibling feature package: declare an interface it satisfies, or, if this package is made of it, make this package a composite (add it to composes",
		"imports "+modulePath+"/ownership: nothing imports a composite package but a composite made of it",
		"imports "+modulePath+"/testing/coordtest: only tests and cmd/ import testing/",
		"Undocumented is not documented",
		"Config field's default is a literal in its doc",
		"withDefaults assigns the literal 30",
		"New calls validate before withDefaults",
		"validates a Config but declares no ConfigError",
		"Store has 2 of Migrate, MigrateTx, MigrationSQL",
		"example discards a value: s, _ := badfeature.New(badfeature.Config{})",
		"Querier is a database handle; the vocabulary names it DBTX or Beginner",
		"SchemaVersion takes a Querier; take a DBTX or a Beginner",
		"SchemaVersion takes a Querier; it takes a DBTX in every package",
		"NewFromPointer takes a *Config: a Config goes by value",
		"Legacy takes an Options: configuration is a Config value",
		"telemetry.go:13: Meter outside metrics.go",
		`instrument named by "badfeature.requests_total": name it by a constant`,
		"metric coordkit.badfeature.latency_ms spells its unit in its name",
		`metric coordkit.badfeature.latency_ms has unit "ms": durations in s`,
		"histogram coordkit.badfeature.wait in seconds without explicit bucket boundaries",
		"metric coord.badfeature.waits does not read coordkit.badfeature.<what>",
		`attribute key "badfeature.tenant" written at the call`,
		"package-level variable defaultStore holds state",
		"package-level variable hits holds state",
	)
	nodoc := loadPkg(t, "testdata/conventions/nodoc", modulePath+"/nodoc")
	if got := strings.Join(conventions([]*pkg{nodoc}), "\n"); !strings.Contains(got, "nodoc: has no package comment") {
		t.Errorf("a package without a comment was not caught; got:\n%s", got)
	}
	floor := loadPkg(t, "testdata/conventions/coord", modulePath+"/coord")
	if got := strings.Join(conventions([]*pkg{floor}), "\n"); !strings.Contains(got, "coord is the floor: standard library only") {
		t.Errorf("coord importing a driver was not caught; got:\n%s", got)
	}
}

// wantCaught fails the test for each of the fixture's violations (wants) that
// got, the checks' findings one a line, does not report.
func wantCaught(t *testing.T, got string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("the fixture's violation %q was not caught; got:\n%s", want, got)
		}
	}
}

// guideMisses returns the top-level packages (features and composites) the
// decision guide does not name as `pkg`.
func guideMisses(guide string, ps []*pkg) []string {
	var miss []string
	for _, p := range ps {
		rel := strings.TrimPrefix(p.importPath, modulePath+"/")
		if !p.library() || strings.Contains(rel, "/") || rel == "coord" || rel == modulePath {
			continue
		}
		if !strings.Contains(guide, "`"+rel+"`") && !strings.Contains(guide, "`"+rel+".") {
			miss = append(miss, rel)
		}
	}
	return miss
}

// TestDecisionGuideNamesEveryPackage: docs/decision-guide.md, the newcomer's
// first page, answers with every feature and composite (a new package that it
// does not name is a question it cannot answer); a guide without one is caught.
func TestDecisionGuideNamesEveryPackage(t *testing.T) {
	b, err := os.ReadFile("docs/decision-guide.md")
	if err != nil {
		t.Fatal(err)
	}
	ps := modulePkgs(t)
	for _, rel := range guideMisses(string(b), ps) {
		t.Errorf("docs/decision-guide.md does not name `%s`: say when to use it", rel)
	}
	if miss := guideMisses(strings.ReplaceAll(string(b), "`ownership", "`owner"), ps); !slices.Contains(miss, "ownership") {
		t.Errorf("a guide without ownership was not caught: %v", miss)
	}
}
