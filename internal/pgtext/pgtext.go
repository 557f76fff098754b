// Package pgtext makes any Go string storable in a PostgreSQL text or jsonb
// value. Clean is used wherever coordkit writes a string it did not validate
// itself (a broker's error text, a step's error, a propagator's header) and
// wherever it quotes user input in an error message; CheckJSONB wherever it
// writes JSON it did not build itself to a jsonb column (an event payload, saga
// data), so that what jsonb refuses is a typed error of the caller's package.
package pgtext

import (
	"strings"
	"unicode/utf8"
)

// Ellipsis ends a string that Clean had to cut.
const Ellipsis = "…"

const replacement = "\uFFFD"

// Clean returns s as a valid UTF-8 string without NUL bytes and at most maxBytes
// bytes long (maxBytes < 0: no limit). Each run of invalid UTF-8 and each NUL
// byte becomes U+FFFD; a result longer than maxBytes is cut on a rune boundary
// and ends with Ellipsis, which counts toward maxBytes (when maxBytes is smaller
// than Ellipsis, the cut is unmarked). A string that is already valid, NUL-free
// and short enough is returned unchanged. PostgreSQL accepts every result in a
// text column and as a jsonb string (which refuses \u0000 and invalid UTF-8:
// SQLSTATE 22021 and 22P05). It does not allocate when nothing changes.
func Clean(s string, maxBytes int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, replacement)
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", replacement)
	}
	if maxBytes < 0 || len(s) <= maxBytes {
		return s
	}
	mark := Ellipsis
	if maxBytes < len(mark) {
		mark = ""
	}
	n := maxBytes - len(mark)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + mark
}
