package pgschema

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/pgtext"
)

// MaxIdentLen is PostgreSQL's identifier limit (NAMEDATALEN-1). The server silently
// truncates a longer name, so two long names could become one; they are refused.
const MaxIdentLen = 63

// maxQuoted bounds a name quoted in an error message.
const maxQuoted = 64

// CheckIdent is the identifier rule of every table, schema, index, constraint and
// channel name coordkit creates: 1 to 63 bytes of valid UTF-8 without control
// characters (NUL included) and without '.', which would read as a schema
// separator (set the Schema field instead). Anything else is fine: names are always
// quoted. field is the Config field the user set, named in the *coord.NameError.
//
// derived lists the names made from name by appending a suffix (an index, a
// constraint, a dead-letter table, a channel): each must fit the limit too, and
// the error for one that does not still names field — the setting to shorten —
// with the derived name and what it is for.
func CheckIdent(field, name string, derived ...Derived) *coord.NameError {
	bad := func(reason string) *coord.NameError {
		return &coord.NameError{Field: field, Value: pgtext.Clean(name, maxQuoted), Reason: reason}
	}
	switch {
	case name == "":
		return bad("empty")
	case !utf8.ValidString(name):
		return bad("not valid UTF-8")
	case len(name) > MaxIdentLen:
		// Releases before v0.1 passed such a name on, and PostgreSQL created the
		// object under the name cut to 63 bytes: that is the name to write.
		return bad(fmt.Sprintf("%d bytes, over PostgreSQL's %d; write at most %d bytes — a table created "+
			"by a release that accepted this name is named %q (PostgreSQL cut it silently), so write that",
			len(name), MaxIdentLen, MaxIdentLen, pgtext.Clean(clip(name, MaxIdentLen), maxQuoted)))
	case strings.Contains(name, "."):
		if schema, table, ok := strings.Cut(name, "."); ok && field == "Table" && schema != "" && table != "" && !strings.Contains(table, ".") {
			return bad(fmt.Sprintf("contains '.': the schema goes in its own field — write Schema: %q, Table: %q "+
				"(releases before v0.1 read %q that way)", schema, table, name))
		}
		return bad("contains '.': name the schema in the Schema field, not in the table name")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return bad(fmt.Sprintf("control character %U", r))
		}
	}
	for _, d := range derived {
		if n := len(name) + len(d.Suffix); n > MaxIdentLen {
			return bad(fmt.Sprintf("the derived %s name %q is %d bytes, over PostgreSQL's %d: shorten %s to at most %d bytes",
				d.What, pgtext.Clean(name+d.Suffix, maxQuoted), n, MaxIdentLen, field, MaxIdentLen-len(d.Suffix)))
		}
	}
	return nil
}

// CheckTable checks the Config fields every Postgres package has: Schema (when
// set) and Table, with the names derived from Table. The error names the field.
func CheckTable(schema, table string, derived ...Derived) *coord.NameError {
	if schema != "" {
		if ne := CheckIdent("Schema", schema); ne != nil {
			return ne
		}
	}
	return CheckIdent("Table", table, derived...)
}

// Derived is a name made from a configured one by appending Suffix.
type Derived struct {
	Suffix string // "_parked", "_key", "_ready"
	What   string // "dead-letter table", "index", "NOTIFY channel"
}

// Qualified returns name quoted, and schema-qualified when schema is not empty.
func Qualified(schema, name string) string {
	if schema == "" {
		return pgx.Identifier{name}.Sanitize()
	}
	return pgx.Identifier{schema, name}.Sanitize()
}

// Quoted returns name quoted as one identifier.
func Quoted(name string) string { return pgx.Identifier{name}.Sanitize() }

// clip cuts name to at most n bytes without splitting a character, as PostgreSQL
// truncates an identifier.
func clip(name string, n int) string {
	if len(name) <= n {
		return name
	}
	for n > 0 && !utf8.RuneStart(name[n]) {
		n--
	}
	return name[:n]
}
