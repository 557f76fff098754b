package idempotency_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/coordkit/coordkit/idempotency"
)

// KeyError.Value (exported, rendered into problem details) is cut on a rune
// boundary and valid UTF-8, even for a key of multi-byte runes cut at byte 64.
func TestKeyErrorValueIsValidUTF8(t *testing.T) {
	err := idempotency.ValidateKeyID(strings.Repeat("a", 63) + "€" + strings.Repeat("b", 10))
	var ke *idempotency.KeyError
	if !errors.As(err, &ke) {
		t.Fatalf("err = %v", err)
	}
	if !utf8.ValidString(ke.Value) || len(ke.Value) > 64 {
		t.Fatalf("Value %q (%d bytes)", ke.Value, len(ke.Value))
	}
}
