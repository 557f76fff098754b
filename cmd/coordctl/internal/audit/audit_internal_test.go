package audit

import (
	"encoding/json"
	"testing"
)

func TestJSONBReplacesOnlyRealNUL(t *testing.T) {
	in := map[string]string{"a": "x\x00y", "b": `lit\u0000`, "c": "\x00\x00"}
	b, err := jsonb(in)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]string
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out["a"] != "x\uFFFDy" || out["b"] != `lit\u0000` || out["c"] != "\uFFFD\uFFFD" {
		t.Fatalf("jsonb = %s → %q", b, out)
	}
}
