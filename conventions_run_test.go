package coordkit_test

import (
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
	for _, want := range []string{
		"imports " + modulePath + "/outbox: a feature package never imports a sibling feature package",
		"imports " + modulePath + "/testing/coordtest: only tests and cmd/ import testing/",
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
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the fixture's violation %q was not caught; got:\n%s", want, got)
		}
	}
	floor := loadPkg(t, "testdata/conventions/coord", modulePath+"/coord")
	if got := strings.Join(conventions([]*pkg{floor}), "\n"); !strings.Contains(got, "coord is the floor: standard library only") {
		t.Errorf("coord importing a driver was not caught; got:\n%s", got)
	}
}
