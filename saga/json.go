package saga

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/coordkit/coordkit/internal/pgtext"
)

// encodeJSON marshals v, refusing values JSON would silently corrupt (invalid
// UTF-8 becomes U+FFFD), values the jsonb columns refuse (pgtext.CheckJSONB: a
// NUL in a string, an unpaired surrogate escape or an out-of-range number in a
// json.RawMessage or json.Number) and values larger than max bytes.
func encodeJSON(what string, v any, max int) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidData, what, err)
	}
	if len(b) > max {
		return nil, fmt.Errorf("%w: %s is %d bytes, limit %d", ErrTooLarge, what, len(b), max)
	}
	if hasReplacedUTF8(b) {
		return nil, fmt.Errorf("%w: %s contains invalid UTF-8", ErrInvalidData, what)
	}
	if reason := pgtext.CheckJSONB(b); reason != "" {
		return nil, fmt.Errorf("%w: %s: %s", ErrInvalidData, what, reason)
	}
	return b, nil
}

// hasReplacedUTF8 reports whether encoding/json replaced invalid UTF-8: it writes
// the escape \ufffd for invalid bytes, while a genuine U+FFFD is written raw.
func hasReplacedUTF8(b []byte) bool {
	const esc = `\ufffd`
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(esc))
		if j < 0 {
			return false
		}
		at := i + j
		n := 0 // backslashes before the escape's own one
		for k := at - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return true
		}
		i = at + len(esc)
	}
}
