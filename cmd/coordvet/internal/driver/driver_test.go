package driver_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vettest"
)

var update = flag.Bool("update", false, "rewrite the inventory golden files")

var (
	modOnce sync.Once
	modDir  string
	modErr  error
)

func TestMain(m *testing.M) { vettest.Main(m) }

// fixture lays out testdata/inventory/app as a module over the real SDK.
func fixture(t *testing.T) string {
	t.Helper()
	modOnce.Do(func() {
		var src []byte
		if modDir, modErr = vettest.SharedDir("coordvet-inventory-"); modErr != nil {
			return
		}
		if src, modErr = os.ReadFile(filepath.Join("..", "..", "testdata", "inventory", "app", "app.go")); modErr != nil {
			return
		}
		modErr = vettest.WriteSDKModule(modDir, "example.com/inventory", map[string][]byte{"app/app.go": src})
	})
	if modErr != nil {
		t.Fatal(modErr)
	}
	return modDir
}

// run runs coordvet in the fixture module and returns stdout, stderr and the
// exit code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(vettest.Coordvet(t), args...)
	cmd.Dir = fixture(t)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "COORDVET_TODAY="+vettest.Today)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// TestJSONExitsOnFindings: -json prints the findings and exits 3, like text.
func TestJSONExitsOnFindings(t *testing.T) {
	out, errOut, code := run(t, "-json", "./...")
	if code != 3 {
		t.Fatalf("exit %d, want 3 (findings)\nstderr: %s", code, errOut)
	}
	var diags []struct {
		Category, Posn, End, Message, URL string
		Related                           []struct{ Posn, Message string }
	}
	if err := json.Unmarshal([]byte(out), &diags); err != nil {
		t.Fatalf("-json output: %v\n%s", err, out)
	}
	byCheck := map[string]int{}
	for _, d := range diags {
		byCheck[d.Category]++
		if d.End == "" || !strings.HasPrefix(d.URL, "https://") {
			t.Errorf("diagnostic without end or absolute URL: %+v", d)
		}
		if d.Category == "dualwrite" && strings.Contains(d.Message, " commits (") && len(d.Related) == 0 {
			t.Errorf("dual write without its commit as a related location: %+v", d)
		}
	}
	for _, c := range []string{"fencetoken", "efficiencydecl", "pavedroad", "dualwrite", "sagapivot", "ignoredirective"} {
		if byCheck[c] == 0 {
			t.Errorf("no %s finding in -json output: %v", c, byCheck)
		}
	}
	if _, _, code := run(t, "-json", "-dualwrite", "./app/..."); code != 3 {
		t.Errorf("-json -dualwrite: exit %d, want 3", code)
	}
}

// TestSARIF checks the SARIF 2.1.0 log: one rule per check with an absolute
// help URI, results pointing at rules, regions with end positions, related
// locations, fixes.
func TestSARIF(t *testing.T) {
	out, errOut, code := run(t, "-sarif", "./...")
	if code != 3 {
		t.Fatalf("exit %d, want 3\nstderr: %s", code, errOut)
	}
	type region struct{ StartLine, StartColumn, EndLine, EndColumn int }
	type location struct {
		ID               *int
		PhysicalLocation struct {
			ArtifactLocation struct{ URI, URIBaseID string }
			Region           region
		}
		Message *struct{ Text string }
	}
	var log struct {
		Schema  string `json:"$schema"`
		Version string
		Runs    []struct {
			Tool struct {
				Driver struct {
					Name  string
					Rules []struct {
						ID, HelpURI      string
						ShortDescription struct{ Text string }
						Help             struct{ Text, Markdown string }
					}
				}
			}
			OriginalURIBaseIDs map[string]struct{ URI string } `json:"originalUriBaseIds"`
			Results            []struct {
				RuleID           string
				RuleIndex        int
				Level            string
				Message          struct{ Text string }
				Locations        []location
				RelatedLocations []location
				Fixes            []struct {
					ArtifactChanges []struct {
						Replacements []struct{ DeletedRegion region }
					}
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &log); err != nil {
		t.Fatalf("SARIF: %v\n%s", err, out)
	}
	if log.Version != "2.1.0" || !strings.Contains(log.Schema, "sarif-2.1.0") || len(log.Runs) != 1 {
		t.Fatalf("not a SARIF 2.1.0 log with one run: version %q schema %q runs %d", log.Version, log.Schema, len(log.Runs))
	}
	r := log.Runs[0]
	ids := map[string]int{}
	for i, rule := range r.Tool.Driver.Rules {
		if _, dup := ids[rule.ID]; dup {
			t.Errorf("rule %s twice", rule.ID)
		}
		ids[rule.ID] = i
		u, err := url.Parse(rule.HelpURI)
		if err != nil || !u.IsAbs() || u.Fragment != rule.ID && rule.ID != "ignoredirective" {
			t.Errorf("rule %s: helpUri %q is not an absolute link to its section", rule.ID, rule.HelpURI)
		}
		if rule.ShortDescription.Text == "" || rule.Help.Markdown == "" {
			t.Errorf("rule %s without description or help", rule.ID)
		}
	}
	if len(ids) != 8 {
		t.Errorf("%d rules, want one per check (8)", len(ids))
	}
	if r.OriginalURIBaseIDs["SRCROOT"].URI == "" {
		t.Error("no %SRCROOT% base")
	}
	related, fixes := 0, 0
	for _, res := range r.Results {
		if i, ok := ids[res.RuleID]; !ok || i != res.RuleIndex {
			t.Errorf("result for rule %s has index %d", res.RuleID, res.RuleIndex)
		}
		if n := len([]rune(res.Message.Text)); n > 200 {
			t.Errorf("message of %d characters: %s", n, res.Message.Text)
		}
		if len(res.Locations) != 1 {
			t.Fatalf("result with %d locations", len(res.Locations))
		}
		loc := res.Locations[0].PhysicalLocation
		reg := loc.Region
		if loc.ArtifactLocation.URIBaseID != "SRCROOT" || !strings.HasPrefix(loc.ArtifactLocation.URI, "app/") {
			t.Errorf("artifact %+v not relative to %%SRCROOT%%", loc.ArtifactLocation)
		}
		if reg.StartLine < 1 || reg.StartColumn < 1 || reg.EndLine < reg.StartLine || reg.EndLine == reg.StartLine && reg.EndColumn < reg.StartColumn {
			t.Errorf("bad region %+v", reg)
		}
		for _, rl := range res.RelatedLocations {
			related++
			if rl.ID == nil || rl.Message == nil || rl.PhysicalLocation.Region.StartLine < 1 {
				t.Errorf("related location without id, message or region: %+v", rl)
			}
		}
		fixes += len(res.Fixes)
	}
	if related == 0 || fixes == 0 {
		t.Errorf("%d related locations and %d fixes in the log; want some of each", related, fixes)
	}
}

// TestInventory runs -inventory on the fixture module and compares the JSON
// and Markdown with the golden files (go test -run TestInventory -update to
// rewrite them after a deliberate change). Two runs must agree byte for byte.
func TestInventory(t *testing.T) {
	var outs [2][2][]byte
	for i := range outs {
		dir := t.TempDir()
		stdout, errOut, code := run(t, "-inventory", "-out", dir, "./...")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, errOut)
		}
		js, err := os.ReadFile(filepath.Join(dir, "coordvet-inventory.json"))
		if err != nil {
			t.Fatal(err)
		}
		md, err := os.ReadFile(filepath.Join(dir, "coordvet-inventory.md"))
		if err != nil {
			t.Fatal(err)
		}
		if stdout != string(md) {
			t.Error("stdout is not the Markdown file")
		}
		outs[i] = [2][]byte{js, md}
	}
	if !bytes.Equal(outs[0][0], outs[1][0]) || !bytes.Equal(outs[0][1], outs[1][1]) {
		t.Fatal("two runs of -inventory differ")
	}
	for i, name := range []string{"inventory.json.golden", "inventory.md.golden"} {
		path := filepath.Join("..", "..", "testdata", "inventory", name)
		if *update {
			if err := os.WriteFile(path, outs[0][i], 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(outs[0][i], want) {
			t.Errorf("%s differs from the golden file (go test -run TestInventory -update):\n%s", name, outs[0][i])
		}
	}
}
