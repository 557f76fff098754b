package plugin_test

import (
	"strings"
	"testing"

	"github.com/golangci/plugin-module-register/register"
	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vettest"
	"github.com/coordkit/coordkit/cmd/coordvet/plugin"
)

func names(as []*analysis.Analyzer) string {
	var out []string
	for _, a := range as {
		out = append(out, a.Name)
	}
	return strings.Join(out, ",")
}

func build(t *testing.T, settings any) []*analysis.Analyzer {
	t.Helper()
	newPlugin, err := register.GetPlugin(plugin.Name)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPlugin(settings)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.GetLoadMode(); got != register.LoadModeTypesInfo {
		t.Fatalf("load mode %q, want %q", got, register.LoadModeTypesInfo)
	}
	as, err := p.BuildAnalyzers()
	if err != nil {
		t.Fatal(err)
	}
	return as
}

func TestDefaultSettings(t *testing.T) {
	const want = "pavedroad,fencetoken,forgedtoken,efficiencydecl,dualwrite,sagapivot,schedulefire,ignoredirective"
	if got := names(build(t, nil)); got != want {
		t.Fatalf("analyzers %s, want %s", got, want)
	}
	if got := names(build(t, map[string]any{})); got != want {
		t.Fatalf("analyzers %s, want %s", got, want)
	}
}

// TestSettingsFromYAML uses the shape golangci-lint hands over after decoding
// .golangci.yml: maps and []any.
func TestSettingsFromYAML(t *testing.T) {
	as := build(t, map[string]any{
		"disable": []any{"sagapivot", "pavedroad"},
		"brokers": []any{"example.com/bus:Client.Send"},
	})
	if got, want := names(as), "fencetoken,forgedtoken,efficiencydecl,dualwrite,schedulefire,ignoredirective"; got != want {
		t.Fatalf("analyzers %s, want %s", got, want)
	}
	for _, a := range as {
		if a.Name == "dualwrite" {
			// The configured broker is reported: the settings reached the analyzer.
			analysistest.Run(t, vettest.TestData(t), a, "plugin/custom")
		}
	}
}

func TestBadSettings(t *testing.T) {
	newPlugin, err := register.GetPlugin(plugin.Name)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]any{
		"unknown key":     map[string]any{"disabled": []any{"sagapivot"}},
		"unknown check":   map[string]any{"disable": []any{"sagapivots"}},
		"malformed entry": map[string]any{"brokers": []any{"no-colon"}},
		"wrong type":      map[string]any{"brokers": "example.com/bus:Send"},
	} {
		if _, err := newPlugin(s); err == nil {
			t.Errorf("%s: settings %v accepted", name, s)
		} else if !strings.HasPrefix(err.Error(), "coordvet: ") {
			t.Errorf("%s: error %q does not name the plugin", name, err)
		}
	}
}

// TestFactsSurviveTheCopy: the plugin's copies keep Requires, FactTypes and
// ResultType, pass analysis.Validate, and find a dual write whose commit and
// publish sit in helpers of another package (facts), with messages that lose
// only the "<check>: " prefix.
func TestFactsSurviveTheCopy(t *testing.T) {
	as := build(t, nil)
	if err := analysis.Validate(as); err != nil {
		t.Fatal(err)
	}
	facts := 0
	for _, a := range as {
		if a.ResultType == nil || len(a.Requires) == 0 {
			t.Errorf("%s lost its Requires or ResultType in the copy", a.Name)
		}
		for _, r := range a.Requires {
			facts += len(r.FactTypes)
		}
		if a.Name == "dualwrite" {
			analysistest.Run(t, vettest.TestData(t), a, "plugin/facts")
		}
	}
	if facts == 0 {
		t.Fatal("no analyzer requires a fact-exporting analyzer")
	}
}

// TestNoLintDoesNotSilence: under golangci-lint a //nolint would drop the
// finding; the plugin moves it to the package clause instead.
func TestNoLintDoesNotSilence(t *testing.T) {
	for _, a := range build(t, nil) {
		if a.Name == "dualwrite" {
			analysistest.Run(t, vettest.TestData(t), a, "plugin/nolint")
		}
	}
}
