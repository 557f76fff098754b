package coordkit_test

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// Package rules of docs/architecture.md held per package: a package comment,
// Config by value, instruments and their names in metrics.go, no package-level
// state.

// checkPackageComment holds "every package says what it is for".
func checkPackageComment(p *pkg) []string {
	for _, f := range p.files {
		if f.Doc != nil {
			return nil
		}
	}
	return []string{p.dir + ": has no package comment (doc.go: what it is for, the one-screen example)"}
}

// configByPointer lists the exported functions still taking a Config by
// pointer, each with its reason (none since membership.Watch and
// grpcresolver.NewBuilder take theirs by value).
var configByPointer = map[string]string{}

// checkConfigByValue holds "a constructor takes a Config value (never
// *Options)": no exported function or method takes a pointer to a …Config, or
// an …Options at all.
func checkConfigByValue(p *pkg) []string {
	rel := strings.TrimPrefix(p.importPath, modulePath+"/")
	var bad []string
	for name, f := range p.files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || !fd.Name.IsExported() || (fd.Recv != nil && !exportedRecv(fd.Recv)) {
				continue
			}
			if configByPointer[rel+"."+fd.Name.Name] != "" {
				continue
			}
			for _, fld := range fd.Type.Params.List {
				st, ptr := fld.Type.(*ast.StarExpr)
				tn := typeName(fld.Type)
				switch {
				case ptr && strings.HasSuffix(typeName(st.X), "Config"):
					bad = append(bad, fmt.Sprintf("%s/%s:%d: %s takes a *%s: a Config goes by value", p.dir, name, p.fset.Position(fld.Pos()).Line, fd.Name.Name, tn))
				case strings.HasSuffix(tn, "Options"):
					bad = append(bad, fmt.Sprintf("%s/%s:%d: %s takes an %s: configuration is a Config value, per-call options a *…Opts", p.dir, name, p.fset.Position(fld.Pos()).Line, fd.Name.Name, tn))
				}
			}
		}
	}
	return bad
}

var (
	// instrumentCtor matches the meter methods that create an instrument.
	instrumentCtor = regexp.MustCompile(`^(Int64|Float64)(Observable)?(Counter|UpDownCounter|Histogram|Gauge)$`)
	// unitSuffix is a unit spelled in a name instead of in the instrument.
	unitSuffix = regexp.MustCompile(`_(ms|millis|milliseconds|us|ns|s|sec|secs|seconds|bytes|total|ratio|percent)$`)
	// okUnit is a unit as the OpenTelemetry semantic conventions write it:
	// seconds for every duration, bytes, a ratio, or a count's annotation.
	okUnit = regexp.MustCompile(`^(s|By|1|\{[a-z_]+\})$`)
)

// checkMetrics holds the telemetry rules: instruments are created in
// metrics.go, each named by a constant of the package that reads
// coordkit.<package>.<what> with no unit in it, with a unit as OpenTelemetry
// says (seconds, not milliseconds) and explicit buckets on a histogram of
// seconds; attribute keys are constants, never literals at the call.
func checkMetrics(p *pkg) []string {
	consts := map[string]string{}
	for _, f := range p.files {
		for _, d := range f.Decls {
			if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.CONST {
				for _, s := range gd.Specs {
					vs := s.(*ast.ValueSpec)
					for i, v := range vs.Values {
						if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[vs.Names[i].Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
		}
	}
	nameRule := regexp.MustCompile(`^coordkit\.` + regexp.QuoteMeta(p.name) + `(\.[a-z][a-z0-9_]*)+$`)
	var bad []string
	for name, f := range p.files {
		where := func(n ast.Node) string { return fmt.Sprintf("%s/%s:%d", p.dir, name, p.fset.Position(n.Pos()).Line) }
		selectorCalls(f, func(call *ast.CallExpr, sel *ast.SelectorExpr) {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "attribute" && len(call.Args) > 0 {
				if lit, ok := call.Args[0].(*ast.BasicLit); ok {
					bad = append(bad, where(call)+": attribute key "+lit.Value+" written at the call: declare it as a constant (coordkit.<package>.<key>) in metrics.go")
				}
				return
			}
			if !instrumentCtor.MatchString(sel.Sel.Name) && sel.Sel.Name != "Meter" {
				return
			}
			if name != "metrics.go" {
				bad = append(bad, where(call)+": "+sel.Sel.Name+" outside metrics.go: instruments live in metrics.go")
			}
			if sel.Sel.Name == "Meter" || len(call.Args) == 0 {
				return
			}
			metricName := ""
			if id, ok := call.Args[0].(*ast.Ident); ok {
				metricName = consts[id.Name]
			}
			switch {
			case metricName == "":
				bad = append(bad, where(call)+": instrument named by "+types.ExprString(call.Args[0])+": name it by a constant of the package")
			case !nameRule.MatchString(metricName):
				bad = append(bad, where(call)+": metric "+metricName+" does not read coordkit."+p.name+".<what> (lower case, dots between namespaces)")
			case unitSuffix.MatchString(path.Ext(metricName)):
				bad = append(bad, where(call)+": metric "+metricName+" spells its unit in its name: the unit goes in metric.WithUnit")
			}
			unit, buckets := "", false
			for _, a := range call.Args[1:] {
				opt, ok := a.(*ast.CallExpr)
				if !ok {
					continue
				}
				if s, ok := opt.Fun.(*ast.SelectorExpr); ok {
					switch s.Sel.Name {
					case "WithUnit":
						if lit, ok := opt.Args[0].(*ast.BasicLit); ok {
							unit, _ = strconv.Unquote(lit.Value)
						}
					case "WithExplicitBucketBoundaries":
						buckets = true
					}
				}
			}
			switch {
			case !okUnit.MatchString(unit):
				bad = append(bad, where(call)+fmt.Sprintf(": metric %s has unit %q: durations in s, counts as {annotation} (OpenTelemetry semantic conventions)", metricName, unit))
			case unit == "s" && strings.HasSuffix(sel.Sel.Name, "Histogram") && !buckets:
				bad = append(bad, where(call)+": histogram "+metricName+" in seconds without explicit bucket boundaries (the SDK's default ones are for milliseconds)")
			}
		})
	}
	return bad
}

// stateAllowed lists the package-level variables that hold state on purpose,
// each with its reason.
var stateAllowed = map[string]string{
	"internal/watchplane.registry":   "one registry of shared watch planes per *clientv3.Client, each plane ended with its client (the lead's watch plane)",
	"internal/watchplane.registryMu": "guards registry",
	"efficiencylock.pttlScript":      "a redis.Script: the embedded Lua and its SHA, immutable",
	"efficiencylock.refreshScript":   "a redis.Script: the embedded Lua and its SHA, immutable",
	"efficiencylock.releaseScript":   "a redis.Script: the embedded Lua and its SHA, immutable",
	"schedule.cronParser":            "a cron.Parser: its options, immutable",
	"testing/coordtest.builds":       "test helper: binaries built once per test process, shared by its tests",
	"testing/coordtest.buildLog":     "test helper: where the builds above log",
	"testing/coordtest.handedOut":    "test helper: ports handed out in this test process, so two servers never share one",
}

// checkPackageState holds "no global state: every instrument and logger hangs
// off a constructed value". A package-level variable is an error value, an
// embedded file (//go:embed), a compiled regexp, a value literal (a table of
// derived names) or a compile-time assertion (var _ I = …); anything else is
// listed in stateAllowed with its reason.
func checkPackageState(p *pkg) []string {
	rel := strings.TrimPrefix(p.importPath, modulePath+"/")
	var bad []string
	for name, f := range p.files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			embedded := strings.Contains(gd.Doc.Text(), "go:embed") || hasEmbed(gd.Doc)
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				embedded = embedded || hasEmbed(vs.Doc)
				for i, n := range vs.Names {
					var v ast.Expr
					if i < len(vs.Values) {
						v = vs.Values[i]
					}
					if n.Name == "_" || embedded || stateAllowed[rel+"."+n.Name] != "" || statelessValue(n.Name, v) {
						continue
					}
					bad = append(bad, fmt.Sprintf("%s/%s:%d: package-level variable %s holds state: hang it off a constructed value (or list it in stateAllowed with its reason)", p.dir, name, p.fset.Position(n.Pos()).Line, n.Name))
				}
			}
		}
	}
	return bad
}

func hasEmbed(cg *ast.CommentGroup) bool {
	if cg == nil {
		return false
	}
	for _, c := range cg.List {
		if strings.HasPrefix(c.Text, "//go:embed") {
			return true
		}
	}
	return false
}

// statelessValue reports whether a package-level variable's value is one of
// the stateless kinds: an error (errors.New, fmt.Errorf, a sentinel
// constructor, another error), a compiled regexp, or a value literal that is
// not a map.
func statelessValue(name string, v ast.Expr) bool {
	isErr := strings.HasPrefix(name, "Err") || strings.HasPrefix(name, "err")
	switch v := v.(type) {
	case *ast.CallExpr:
		fn := fmt.Sprint(v.Fun)
		if s, ok := v.Fun.(*ast.SelectorExpr); ok {
			fn = fmt.Sprint(s.X) + "." + s.Sel.Name
		}
		switch fn {
		case "errors.New", "fmt.Errorf", "sentinel.Retryable":
			return isErr
		case "regexp.MustCompile":
			return true
		}
	case *ast.Ident:
		return isErr
	case *ast.CompositeLit:
		_, isMap := v.Type.(*ast.MapType)
		return !isMap
	}
	return false
}
