package coord

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// An offending value is quoted in the error cut to 64 bytes; the cut must fall on
// a rune boundary, or NameError.Value (exported, logged, stored by callers) is
// invalid UTF-8.
func TestNameErrorValueIsCutOnARuneBoundary(t *testing.T) {
	name := strings.Repeat("a", 63) + "€" + strings.Repeat("b", 300) // "€" straddles byte 64
	err := ValidateName("name", name, 128)
	var ne *NameError
	if !errors.As(err, &ne) {
		t.Fatalf("err = %v", err)
	}
	if !utf8.ValidString(ne.Value) || len(ne.Value) > 64+len("…") {
		t.Fatalf("Value %q (%d bytes): invalid UTF-8 or too long", ne.Value, len(ne.Value))
	}
	if _, err := ParseToken(strings.Repeat("a", 63) + "€x"); !utf8.ValidString(err.Error()) {
		t.Fatalf("ParseToken error %q: invalid UTF-8", err)
	}
}
