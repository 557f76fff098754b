package coordkit_test

import (
	"fmt"
	"go/ast"
	"go/token"
	"regexp"
	"slices"
	"strings"
)

// defaultClause is the "Default …" clause of a field's doc, up to its first
// '.', ':' or ';'. It states a literal when it holds a digit that is not the
// divisor of a fraction of another field ("Default LeaseTTL/3" is fine,
// "Default 30 s" is not).
var (
	defaultClause = regexp.MustCompile(`\bDefault\b[^.:;]*`)
	fraction      = regexp.MustCompile(`/\d+`)
	digit         = regexp.MustCompile(`\d`)
	namedDefault  = regexp.MustCompile(`\bDefault[A-Z]\w*`)
)

// statesLiteral reports whether doc's default clause states a literal value.
func statesLiteral(doc string) bool {
	for _, c := range defaultClause.FindAllString(doc, -1) {
		if digit.MatchString(fraction.ReplaceAllString(c, "")) {
			return true
		}
	}
	return false
}

// checkConfigs holds the Config conventions: a default stated as a value names
// the Default… constant that holds it, and that constant exists; withDefaults
// assigns no literal (its values come from the constants); a constructor calls
// withDefaults before validate; a package with a validate method reports with a
// ConfigError of its own (or of the parent package it adapts).
func checkConfigs(p *pkg, parentHasConfigError bool) []string {
	var bad []string
	declared := map[string]bool{}
	hasValidate, hasConfigError := false, false
	for _, f := range p.files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							declared[n.Name] = true
						}
					case *ast.TypeSpec:
						if s.Name.Name == "ConfigError" {
							hasConfigError = true
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil && d.Name.Name == "validate" {
					hasValidate = true
				}
			}
		}
	}
	for name, f := range p.files {
		where := func(n ast.Node) string { return fmt.Sprintf("%s/%s:%d", p.dir, name, p.fset.Position(n.Pos()).Line) }
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeSpec:
				st, ok := n.Type.(*ast.StructType)
				if !ok || !strings.HasSuffix(n.Name.Name, "Config") || !n.Name.IsExported() {
					return true
				}
				for _, fld := range st.Fields.List {
					doc := strings.Join(strings.Fields(fld.Doc.Text()), " ")
					if !statesLiteral(doc) {
						continue
					}
					m := namedDefault.FindAllString(doc, -1)
					if len(m) == 0 {
						bad = append(bad, where(fld)+": "+n.Name.Name+" field's default is a literal in its doc; name the Default… constant")
					}
					for _, c := range m {
						if !declared[c] && !strings.Contains(doc, "."+c) {
							bad = append(bad, where(fld)+": "+n.Name.Name+" doc names "+c+", which the package does not declare")
						}
					}
				}
			case *ast.FuncDecl:
				if n.Body == nil {
					return true
				}
				if n.Recv != nil && n.Name.Name == "withDefaults" {
					divisors := map[ast.Node]bool{} // the N of "x / N": a fraction of another field
					ast.Inspect(n.Body, func(m ast.Node) bool {
						if b, ok := m.(*ast.BinaryExpr); ok && b.Op == token.QUO {
							divisors[b.Y] = true
						}
						if lit, ok := m.(*ast.BasicLit); ok && lit.Value != "0" && lit.Value != `""` && !divisors[lit] {
							bad = append(bad, where(lit)+": withDefaults assigns the literal "+lit.Value+"; declare a Default… constant")
						}
						return true
					})
					return true
				}
				// Per receiver: withDefaults before validate.
				order := map[string][]string{}
				ast.Inspect(n.Body, func(m ast.Node) bool {
					if c, ok := m.(*ast.CallExpr); ok {
						if s, ok := c.Fun.(*ast.SelectorExpr); ok && (s.Sel.Name == "withDefaults" || s.Sel.Name == "validate") {
							recv := fmt.Sprint(s.X)
							order[recv] = append(order[recv], s.Sel.Name)
						}
					}
					return true
				})
				for _, o := range order {
					if i := slices.Index(o, "validate"); i >= 0 && slices.Contains(o[i:], "withDefaults") {
						bad = append(bad, where(n)+": "+n.Name.Name+" calls validate before withDefaults")
					}
				}
			}
			return true
		})
	}
	if hasValidate && !hasConfigError && !parentHasConfigError {
		bad = append(bad, p.dir+": validates a Config but declares no ConfigError")
	}
	return bad
}
