package httpidem_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/idempotency/httpidem"
)

func TestParseKey(t *testing.T) {
	ok := map[string]string{
		`"abc"`:                                  "abc",
		` "abc" `:                                "abc",
		`"a\"b\\c"`:                              `a"b\c`,
		`"8e03978e-40d5-43e8-bc93-6894a57f9324"`: "8e03978e-40d5-43e8-bc93-6894a57f9324",
		`"k";a=1;b="x";c;d=?1`:                   "k",
		`"with space"`:                           "with space",
		`8e03978e-40d5-43e8-bc93-6894a57f9324`:   "8e03978e-40d5-43e8-bc93-6894a57f9324",
		`abc:def/ghi=`:                           "abc:def/ghi=",
		`"` + strings.Repeat("k", 255) + `"`:     strings.Repeat("k", 255),
	}
	for in, want := range ok {
		got, err := httpidem.ParseKey([]string{in}, false)
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", in, got, err, want)
		}
	}
	bad := []string{``, `""`, `"abc`, `"a\b"`, `"a"b`, `"a", "b"`, `"a";`, `"a";A=1`, `"a";b=`, `a b`, `a"b`, `"é"`, "\"a\x7f\"", "\"a\tb\"",
		`"` + strings.Repeat("k", 256) + `"`, `abc;x=1`, `(abc)`}
	for _, in := range bad {
		if _, err := httpidem.ParseKey([]string{in}, false); !errors.Is(err, idempotency.ErrInvalidKey) {
			t.Errorf("%q: %v, want ErrInvalidKey", in, err)
		}
	}
	if _, err := httpidem.ParseKey(nil, false); !errors.Is(err, httpidem.ErrMissingKey) {
		t.Errorf("missing: %v", err)
	}
	if _, err := httpidem.ParseKey([]string{`"a"`, `"a"`}, false); !errors.Is(err, idempotency.ErrInvalidKey) {
		t.Errorf("two lines: %v", err)
	}
	if _, err := httpidem.ParseKey([]string{`abc`}, true); !errors.Is(err, idempotency.ErrInvalidKey) {
		t.Errorf("strict bare token: %v", err)
	}
}

// FuzzParseKey: the parser never panics, every accepted key is a valid key ID, and
// quoting it as an sf-string parses back to the same key in strict mode.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\"b"`, `abc`, `"k";a=1;b="x"`, `"`, `\`, `"a\`, "\"\xff\"", `"a";b=?0`, ` "x" `} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		k, err := httpidem.ParseKey([]string{in}, false)
		if err != nil {
			if !errors.Is(err, idempotency.ErrInvalidKey) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if err := idempotency.ValidateKeyID(k); err != nil {
			t.Fatalf("accepted invalid key %q: %v", k, err)
		}
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(k) + `"`
		k2, err := httpidem.ParseKey([]string{quoted}, true)
		if err != nil || k2 != k {
			t.Fatalf("round trip %q → %s → %q, %v", k, quoted, k2, err)
		}
	})
}
