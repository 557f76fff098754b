package driver

import (
	"encoding/json"
	"go/token"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"golang.org/x/tools/go/analysis"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

// SARIF 2.1.0, the subset coordvet writes. Field names follow the OASIS
// schema (https://docs.oasis-open.org/sarif/sarif/v2.1.0/).
type (
	sarifLog struct {
		Schema  string     `json:"$schema"`
		Version string     `json:"version"`
		Runs    []sarifRun `json:"runs"`
	}
	sarifRun struct {
		Tool               sarifTool                   `json:"tool"`
		OriginalURIBaseIDs map[string]sarifArtifactLoc `json:"originalUriBaseIds,omitempty"`
		ColumnKind         string                      `json:"columnKind"`
		Results            []sarifResult               `json:"results"`
	}
	sarifTool struct {
		Driver sarifDriver `json:"driver"`
	}
	sarifDriver struct {
		Name           string      `json:"name"`
		InformationURI string      `json:"informationUri"`
		Rules          []sarifRule `json:"rules"`
	}
	sarifRule struct {
		ID                   string         `json:"id"`
		Name                 string         `json:"name"`
		ShortDescription     sarifText      `json:"shortDescription"`
		FullDescription      sarifText      `json:"fullDescription"`
		HelpURI              string         `json:"helpUri"`
		Help                 sarifMultiText `json:"help"`
		DefaultConfiguration sarifConfig    `json:"defaultConfiguration"`
		Properties           map[string]any `json:"properties,omitempty"`
	}
	sarifConfig struct {
		Level string `json:"level"`
	}
	sarifText struct {
		Text string `json:"text"`
	}
	sarifMultiText struct {
		Text     string `json:"text"`
		Markdown string `json:"markdown"`
	}
	sarifResult struct {
		RuleID           string          `json:"ruleId"`
		RuleIndex        int             `json:"ruleIndex"`
		Level            string          `json:"level"`
		Message          sarifText       `json:"message"`
		Locations        []sarifLocation `json:"locations"`
		RelatedLocations []sarifLocation `json:"relatedLocations,omitempty"`
		Fixes            []sarifFix      `json:"fixes,omitempty"`
	}
	sarifLocation struct {
		ID               *int          `json:"id,omitempty"`
		PhysicalLocation sarifPhysical `json:"physicalLocation"`
		Message          *sarifText    `json:"message,omitempty"`
	}
	sarifPhysical struct {
		ArtifactLocation sarifArtifactLoc `json:"artifactLocation"`
		Region           sarifRegion      `json:"region"`
	}
	sarifArtifactLoc struct {
		URI       string `json:"uri"`
		URIBaseID string `json:"uriBaseId,omitempty"`
	}
	sarifRegion struct {
		StartLine   int `json:"startLine"`
		StartColumn int `json:"startColumn"`
		EndLine     int `json:"endLine,omitempty"`
		EndColumn   int `json:"endColumn,omitempty"`
	}
	sarifFix struct {
		Description     sarifText             `json:"description"`
		ArtifactChanges []sarifArtifactChange `json:"artifactChanges"`
	}
	sarifArtifactChange struct {
		ArtifactLocation sarifArtifactLoc   `json:"artifactLocation"`
		Replacements     []sarifReplacement `json:"replacements"`
	}
	sarifReplacement struct {
		DeletedRegion   sarifRegion `json:"deletedRegion"`
		InsertedContent *sarifText  `json:"insertedContent,omitempty"`
	}
)

const sarifSchema = "https://json.schemastore.org/sarif-2.1.0.json"

// writeSARIF writes one run with one rule per check (ignoredirective included)
// and one result per diagnostic; paths are relative to %SRCROOT%, the working
// directory, when they lie below it.
func writeSARIF(w io.Writer, analyzers []*analysis.Analyzer, diags []Diag) error {
	wd, _ := os.Getwd()
	run := sarifRun{
		Tool:       sarifTool{Driver: sarifDriver{Name: "coordvet", InformationURI: vetutil.DocURL}},
		ColumnKind: "unicodeCodePoints",
		Results:    []sarifResult{},
	}
	if wd != "" {
		run.OriginalURIBaseIDs = map[string]sarifArtifactLoc{"SRCROOT": {URI: (&url.URL{Scheme: "file", Path: filepath.ToSlash(wd) + "/"}).String()}}
	}
	index := map[string]int{}
	for _, a := range analyzers {
		summary, body, _ := strings.Cut(a.Doc, "\n")
		index[a.Name] = len(run.Tool.Driver.Rules)
		rule := sarifRule{
			ID: a.Name, Name: a.Name,
			ShortDescription:     sarifText{Text: summary},
			FullDescription:      sarifText{Text: strings.TrimSpace(body)},
			HelpURI:              a.URL,
			Help:                 sarifMultiText{Text: a.Doc, Markdown: "**" + summary + ".**\n\n" + strings.TrimSpace(body) + "\n\n" + a.URL},
			DefaultConfiguration: sarifConfig{Level: "error"},
		}
		for _, c := range vetutil.Checks() {
			if c.Name == a.Name {
				rule.Properties = map[string]any{"tags": []string{"RFC-COORD-001", "RFC " + c.Rule}}
			}
		}
		run.Tool.Driver.Rules = append(run.Tool.Driver.Rules, rule)
	}
	lines := newColumns()
	for _, d := range diags {
		i, ok := index[d.Check]
		if !ok {
			continue
		}
		res := sarifResult{RuleID: d.Check, RuleIndex: i, Level: "error", Message: sarifText{Text: d.Message},
			Locations: []sarifLocation{{PhysicalLocation: lines.physical(d.Posn, d.End)}}}
		for k, r := range d.Related {
			id := k + 1
			res.RelatedLocations = append(res.RelatedLocations, sarifLocation{ID: &id, PhysicalLocation: lines.physical(r.Posn, r.End), Message: &sarifText{Text: r.Message}})
		}
		for _, f := range d.Fixes {
			byFile := map[string]*sarifArtifactChange{}
			var order []string
			for _, e := range f.Edits {
				loc := artifact(e.Posn.Filename)
				ch := byFile[loc.URI]
				if ch == nil {
					ch = &sarifArtifactChange{ArtifactLocation: loc}
					byFile[loc.URI] = ch
					order = append(order, loc.URI)
				}
				rep := sarifReplacement{DeletedRegion: lines.region(e.Posn, e.End)}
				if e.NewText != "" {
					rep.InsertedContent = &sarifText{Text: e.NewText}
				}
				ch.Replacements = append(ch.Replacements, rep)
			}
			fx := sarifFix{Description: sarifText{Text: f.Message}}
			for _, u := range order {
				fx.ArtifactChanges = append(fx.ArtifactChanges, *byFile[u])
			}
			res.Fixes = append(res.Fixes, fx)
		}
		run.Results = append(run.Results, res)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(sarifLog{Schema: sarifSchema, Version: "2.1.0", Runs: []sarifRun{run}})
}

func artifact(file string) sarifArtifactLoc {
	if rel, ok := relPath(file); ok {
		return sarifArtifactLoc{URI: (&url.URL{Path: rel}).String(), URIBaseID: "SRCROOT"}
	}
	return sarifArtifactLoc{URI: (&url.URL{Scheme: "file", Path: filepath.ToSlash(file)}).String()}
}

// columns converts go/token's byte columns into SARIF's code-point columns.
type columns struct{ files map[string][]string }

func newColumns() *columns { return &columns{files: map[string][]string{}} }

func (c *columns) col(p token.Position) int {
	lines, ok := c.files[p.Filename]
	if !ok {
		b, err := os.ReadFile(p.Filename)
		if err == nil {
			lines = strings.Split(string(b), "\n")
		}
		c.files[p.Filename] = lines
	}
	if p.Line-1 >= len(lines) || p.Column < 1 {
		return max(p.Column, 1)
	}
	line := lines[p.Line-1]
	if p.Column-1 > len(line) {
		return p.Column
	}
	return utf8.RuneCountInString(line[:p.Column-1]) + 1
}

func (c *columns) region(start, end token.Position) sarifRegion {
	r := sarifRegion{StartLine: max(start.Line, 1), StartColumn: c.col(start)}
	if end.IsValid() && end.Line >= start.Line {
		r.EndLine, r.EndColumn = end.Line, c.col(end)
	} else {
		r.EndLine, r.EndColumn = r.StartLine, r.StartColumn
	}
	return r
}

func (c *columns) physical(start, end token.Position) sarifPhysical {
	return sarifPhysical{ArtifactLocation: artifact(start.Filename), Region: c.region(start, end)}
}
