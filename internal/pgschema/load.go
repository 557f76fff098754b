package pgschema

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// fileName is a migration file: three digits, a description, ".sql".
var fileName = regexp.MustCompile(`^([0-9]{3})_([a-z0-9_]+)\.sql$`)

// placeholder is a {{name}} in a migration file.
var placeholder = regexp.MustCompile(`\{\{[a-z_]+\}\}`)

// Load reads the migrations of one component from dir in fsys (an embed.FS):
// files NNN_description.sql, numbered 001, 002, ... without gaps. Every {{name}}
// in a file is replaced by vars[name], which the caller has quoted; a placeholder
// without a value, an unused value, a gap or a stray file is an error (a bug in
// the package shipping the files, which its tests catch).
func Load(fsys fs.FS, dir string, vars map[string]string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("migrations %s: %w", dir, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	used := map[string]bool{}
	var out []Migration
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migrations %s: %q is not NNN_description.sql", dir, e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		if v != len(out)+1 {
			return nil, fmt.Errorf("migrations %s: %s: want version %d next", dir, e.Name(), len(out)+1)
		}
		body, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("migrations %s: %w", dir, err)
		}
		var missing []string
		sql := placeholder.ReplaceAllStringFunc(string(body), func(p string) string {
			name := p[2 : len(p)-2]
			val, ok := vars[name]
			if !ok {
				missing = append(missing, p)
				return p
			}
			used[name] = true
			return val
		})
		if len(missing) > 0 {
			return nil, fmt.Errorf("migrations %s: %s: no value for %s", dir, e.Name(), strings.Join(missing, ", "))
		}
		out = append(out, Migration{Version: v, Description: m[2], SQL: sql})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("migrations %s: no migration files", dir)
	}
	for name := range vars {
		if !used[name] {
			return nil, fmt.Errorf("migrations %s: value for {{%s}} is used by no file", dir, name)
		}
	}
	return out, nil
}

// LoadMigrations returns c with its Migrations read by Load from dir in fsys; an
// error is prefixed with c.Owner, as every error of Migrate is.
func (c Component) LoadMigrations(fsys fs.FS, dir string, vars map[string]string) (Component, error) {
	ms, err := Load(fsys, dir, vars)
	if err != nil {
		return Component{}, c.fail(err)
	}
	c.Migrations = ms
	return c, nil
}
