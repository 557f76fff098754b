package idempotency_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/coordkit/coordkit/idempotency"
)

func TestFingerprintJSONIsCanonical(t *testing.T) {
	same := [][]byte{
		[]byte(`{"a":1,"b":{"x":[1,2,{"q":true,"p":null}],"y":"é"}}`),
		[]byte("{ \"b\" : { \"y\":\"\\u00e9\", \"x\" : [1, 2, {\"p\":null, \"q\":true}] },\n\t\"a\" : 1 }"),
	}
	f0, err := idempotency.FingerprintJSON("POST", "/p", same[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range same[1:] {
		f, err := idempotency.FingerprintJSON("POST", "/p", b)
		if err != nil || f != f0 {
			t.Fatalf("%s: %v %v, want equal fingerprints", b, f, err)
		}
	}
	differ := map[string][3]string{
		"value":   {"POST", "/p", `{"a":2,"b":{"x":[1,2,{"q":true,"p":null}],"y":"é"}}`},
		"order":   {"POST", "/p", `{"a":1,"b":{"x":[2,1,{"q":true,"p":null}],"y":"é"}}`},
		"method":  {"PATCH", "/p", string(same[0])},
		"path":    {"POST", "/q", string(same[0])},
		"number":  {"POST", "/p", `{"a":1.0,"b":{"x":[1,2,{"q":true,"p":null}],"y":"é"}}`},
		"missing": {"POST", "/p", `{"b":{"x":[1,2,{"q":true,"p":null}],"y":"é"}}`},
	}
	for name, d := range differ {
		f, err := idempotency.FingerprintJSON(d[0], d[1], []byte(d[2]))
		if err != nil || f == f0 {
			t.Errorf("%s: fingerprint equal (%v)", name, err)
		}
	}
	// Boundaries between parts are hashed.
	if idempotency.FingerprintOf([]byte("ab"), []byte("c")) == idempotency.FingerprintOf([]byte("a"), []byte("bc")) {
		t.Fatal("part boundaries ignored")
	}
	// Large numbers keep their digits.
	a, _ := idempotency.FingerprintJSON("POST", "/", []byte(`{"n":12345678901234567890}`))
	b, _ := idempotency.FingerprintJSON("POST", "/", []byte(`{"n":12345678901234567891}`))
	if a == b {
		t.Fatal("big numbers collapsed")
	}
}

func TestFingerprintJSONRejectsBadInput(t *testing.T) {
	for _, b := range []string{"{\"a\":\"\xff\"}", `{"a":`, `{} {}`, `{"a":1}x`, "\xc3\x28"} {
		if _, err := idempotency.FingerprintJSON("POST", "/", []byte(b)); !errors.Is(err, idempotency.ErrInvalidBody) {
			t.Errorf("%q: %v, want ErrInvalidBody", b, err)
		}
	}
	if _, err := idempotency.FingerprintJSON("POST", "/", nil); err != nil {
		t.Fatalf("empty body: %v", err)
	}
}

// FuzzCanonicalJSON: canonical output is valid JSON, a fixed point, and equal to the
// canonical form of the same value re-encoded any other way.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[true,null,"x"]}`, `[1, 2.50, -0, 1e10]`, `"\u2028<>&"`, `{"a":{"a":{}}}`, "{\"a\":\"\xff\"}", `{"a":1,"a":2}`, `  7  `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := idempotency.CanonicalJSON(b)
		if err != nil {
			if !errors.Is(err, idempotency.ErrInvalidBody) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if !json.Valid(c) {
			t.Fatalf("canonical form %q is not valid JSON", c)
		}
		c2, err := idempotency.CanonicalJSON(c)
		if err != nil || !bytes.Equal(c, c2) {
			t.Fatalf("not a fixed point: %q → %q (%v)", c, c2, err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("accepted %q that encoding/json rejects: %v", b, err)
		}
		pretty, _ := json.MarshalIndent(v, "", "  ")
		if c3, err := idempotency.CanonicalJSON(pretty); err == nil && json.Valid(c3) {
			var v1, v2 any
			_ = json.Unmarshal(c, &v1)
			_ = json.Unmarshal(c3, &v2)
			if !jsonEqual(v1, v2) {
				t.Fatalf("re-indented value canonicalises differently: %q vs %q", c, c3)
			}
		}
	})
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
