package saga

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
)

func TestNewRejects(t *testing.T) {
	ok := func(context.Context, StepContext, *int) error { return nil }
	c := func(n string) Step[int] { return Compensatable(n, ok, ok) }
	tests := []struct {
		name  string
		saga  string
		steps []Step[int]
		want  error
	}{
		{"no pivot", "s", []Step[int]{c("a"), c("b")}, ErrNoPivot},
		{"two pivots", "s", []Step[int]{c("a"), Pivot("p", ok), Pivot("q", ok)}, ErrTwoPivots},
		{"nil compensation", "s", []Step[int]{Compensatable[int]("a", ok, nil), Pivot("p", ok)}, ErrNoCompensation},
		{"compensatable after pivot", "s", []Step[int]{Pivot("p", ok), c("a")}, ErrCompensationAfterPivot},
		{"retriable before pivot", "s", []Step[int]{Retriable("r", ok), Pivot("p", ok)}, ErrInvalidDefinition},
		{"no steps", "s", nil, ErrInvalidDefinition},
		{"duplicate step", "s", []Step[int]{c("a"), c("a"), Pivot("p", ok)}, ErrInvalidDefinition},
		{"nil action", "s", []Step[int]{Pivot[int]("p", nil)}, ErrInvalidDefinition},
		{"zero step", "s", []Step[int]{{}, Pivot("p", ok)}, coord.ErrInvalidName},
		{"slash in step", "s", []Step[int]{Pivot("a/b", ok)}, coord.ErrInvalidName},
		{"bad saga name", "a b", []Step[int]{Pivot("p", ok)}, coord.ErrInvalidName},
		{"invalid utf8", "s\xff", []Step[int]{Pivot("p", ok)}, coord.ErrInvalidName},
		{"too many", "s", append(make([]Step[int], 0), manySteps(MaxSteps+1)...), ErrInvalidDefinition},
	}
	for _, tt := range tests {
		_, err := New(tt.saga, tt.steps...)
		var de *DefinitionError
		if !errors.Is(err, tt.want) || !errors.As(err, &de) {
			t.Errorf("%s: New = %v, want %v in a *DefinitionError", tt.name, err, tt.want)
		}
		// New's doc lists a bad name under ErrInvalidDefinition too.
		if tt.want == coord.ErrInvalidName && !errors.Is(err, ErrInvalidDefinition) {
			t.Errorf("%s: New = %v, want it to match ErrInvalidDefinition as well", tt.name, err)
		}
	}
	d, err := New("s", c("a"), c("b"), Pivot("p", ok), Retriable("r", ok))
	if err != nil || d.PivotIndex() != 2 || len(d.Steps()) != 4 || d.Name() != "s" {
		t.Fatalf("valid definition: %v %+v", err, d)
	}
	if k := d.Steps()[3].Kind(); k != KindRetriable {
		t.Fatalf("kind %s", k)
	}
}

func manySteps(n int) []Step[int] {
	ok := func(context.Context, StepContext, *int) error { return nil }
	out := []Step[int]{Pivot("p", ok)}
	for i := 1; i < n; i++ {
		out = append(out, Retriable(strings.Repeat("r", i%150+1)+string(rune('a'+i%26)), ok))
	}
	return out
}

func TestEncodeJSONRejectsInvalidUTF8(t *testing.T) {
	if _, err := encodeJSON("x", map[string]string{"a": "ok\xff"}, 1000); !errors.Is(err, ErrInvalidData) {
		t.Fatalf("invalid UTF-8: %v", err)
	}
	for _, v := range []any{"\uFFFD genuine", `literal \ufffd text`, `\\ufffd`} {
		if _, err := encodeJSON("x", v, 1000); err != nil {
			t.Fatalf("%q rejected: %v", v, err)
		}
	}
	if _, err := encodeJSON("x", strings.Repeat("a", 100), 50); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	if _, err := encodeJSON("x", func() {}, 50); !errors.Is(err, ErrInvalidData) {
		t.Fatalf("func: %v", err)
	}
}

func TestFailIsBusiness(t *testing.T) {
	base := errors.New("card declined")
	err := Fail(base)
	if !errors.Is(err, ErrBusiness) || !errors.Is(err, base) {
		t.Fatalf("Fail: %v", err)
	}
	if !errors.Is(Fail(nil), ErrBusiness) || errors.Is(base, ErrBusiness) {
		t.Fatal("classification")
	}
}

func TestParseKey(t *testing.T) {
	id, step, err := ParseKey("abc/charge")
	if err != nil || id != "abc" || step != "charge" {
		t.Fatalf("ParseKey = %q %q %v", id, step, err)
	}
	for _, k := range []string{"", "abc", "/x", "abc/", "a b/x", "abc/x/y", "a\xff/x"} {
		if _, _, err := ParseKey(k); !errors.Is(err, ErrBarrierKey) {
			t.Errorf("ParseKey(%q) = %v", k, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	// The one identifier rule: at most 63 bytes with every derived name, no '.',
	// no control character, valid UTF-8. 44 bytes fit, but the derived constraint
	// "…_no_comp_after_pivot" would not; the barrier derives nothing.
	for _, tc := range []struct {
		table      string
		sagaBad    bool
		barrierBad bool
	}{
		{`x"; DROP TABLE users; --`, false, false},
		{"a.b", true, true},
		{"tabl\x00e", true, true},
		{strings.Repeat("a", 64), true, true},
		{strings.Repeat("a", 43), false, false},
		{strings.Repeat("a", 44), true, false},
	} {
		check := func(what string, err error, wantBad bool) {
			var ce *ConfigError
			if wantBad != (err != nil) || (err != nil && (!errors.As(err, &ce) || ce.Field != "Table" || !errors.Is(err, ErrInvalidConfig))) {
				t.Errorf("%s %q: %v, want a *ConfigError for Table: %v", what, tc.table, err, wantBad)
			}
		}
		check("Config", Config{Table: tc.table}.withDefaults().validate(), tc.sagaBad)
		_, err := NewBarrier(BarrierConfig{Table: tc.table})
		check("NewBarrier", err, tc.barrierBad)
	}
	var ce *ConfigError
	if _, err := NewBarrier(BarrierConfig{Schema: "s\n"}); !errors.As(err, &ce) || ce.Field != "Schema" {
		t.Errorf("bad barrier schema: %v", err)
	}
	bad := []Config{{Concurrency: -1}, {ClaimTTL: time.Millisecond}, {CompensationAttempts: -1}, {StuckAfter: -1}, {MaxDataBytes: 1}}
	for _, c := range bad {
		if err := c.withDefaults().validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if err := (Config{}).withDefaults().validate(); err != nil {
		t.Fatal(err)
	}
}

// JSON that encoding/json writes but PostgreSQL's jsonb refuses — a NUL in a
// string (written as \u0000), and, through json.RawMessage or json.Number, an
// unpaired surrogate escape or a number beyond numeric's range — is
// ErrInvalidData before anything is sent, not a bare 22P05 or 22003 from the
// database when the saga starts or a step records its output.
func TestEncodeJSONRejectsWhatJSONBRefuses(t *testing.T) {
	for _, v := range []any{
		map[string]string{"a": "nul\x00byte"},
		json.RawMessage(`{"a":"\ud800"}`),
		json.RawMessage(`{"n":1e999999}`),
		json.Number("1e-99999"),
	} {
		if _, err := encodeJSON("x", v, 1000); !errors.Is(err, ErrInvalidData) {
			t.Errorf("encodeJSON(%v) = %v, want ErrInvalidData", v, err)
		}
	}
	_, c, def := newFastClient(t)
	if _, err := Start(context.Background(), c, def, order{FailAt: "nul\x00byte"}, nil); !errors.Is(err, ErrInvalidData) {
		t.Fatalf("Start with a NUL in the data: %v, want ErrInvalidData", err)
	}
}
