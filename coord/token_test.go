package coord

import (
	"errors"
	"strings"
	"testing"
)

func TestTokenRoundTrip(t *testing.T) {
	for _, tok := range []Token{
		newToken("/tenants/acme/elections/billing", 1),
		newToken("/tenants/acme/elections/billing", 9223372036854775807),
		newToken("/tenants/ünïcødé/elections/a@b%c d", 42),
		newToken("x", 7),
	} {
		s := tok.String()
		for i := 0; i < len(s); i++ {
			if s[i] < 0x21 || s[i] > 0x7e {
				t.Fatalf("%q is not a header-safe value (byte %d = %#x)", s, i, s[i])
			}
		}
		got, err := ParseToken(s)
		if err != nil {
			t.Fatalf("ParseToken(%q): %v", s, err)
		}
		if got != tok {
			t.Fatalf("round trip of %v gave %v", tok, got)
		}
		b, err := tok.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var u Token
		if err := u.UnmarshalText(b); err != nil || u != tok {
			t.Fatalf("text round trip: %v %v", u, err)
		}
	}
}

func TestParseTokenRejects(t *testing.T) {
	for _, s := range []string{
		"", "@", "lease", "lease@", "@5", "lease@0", "lease@-1", "lease@+1", "lease@01",
		"lease@1.5", "lease@99999999999999999999", "le ase@1", "lease%@1", "lease%2@1",
		"lease%zz@1", "lease%2f@1", // lower-case hex is not canonical
		"lease%41@1", // escaping a safe byte is not canonical
		"lease%00@1", "lease%0A@1", "lease%FF@1", "lease%7F@1",
		strings.Repeat("a", maxLeaseLen+1) + "@1",
		"lease\x00@1", "lease\n@1", "lea\u00e9se@1",
	} {
		if tok, err := ParseToken(s); err == nil {
			t.Errorf("ParseToken(%q) = %v, want error", s, tok)
		} else if !errors.Is(err, ErrInvalidToken) {
			t.Errorf("ParseToken(%q) error %v does not match ErrInvalidToken", s, err)
		}
	}
}

func TestValidateLease(t *testing.T) {
	for _, ok := range []string{"/tenants/acme/elections/billing", "lea se", "lé"} {
		if err := ValidateLease(ok); err != nil {
			t.Errorf("ValidateLease(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "nul\x00", "line\n", "cut\xc3", strings.Repeat("a", maxLeaseLen+1)} {
		if err := ValidateLease(bad); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("ValidateLease(%q) = %v, want ErrInvalidToken", bad, err)
		}
	}
}

func TestTokenCompare(t *testing.T) {
	a1, a2 := newToken("a", 1), newToken("a", 2)
	tests := []struct {
		x, y   Token
		cmp    int
		sameOK bool
	}{
		{a1, a2, -1, true},
		{a2, a1, 1, true},
		{a1, a1, 0, true},
		{a1, newToken("b", 1), 0, false},
	}
	for _, tt := range tests {
		cmp, ok := tt.x.Compare(tt.y)
		if cmp != tt.cmp || ok != tt.sameOK {
			t.Errorf("%v.Compare(%v) = %d, %v; want %d, %v", tt.x, tt.y, cmp, ok, tt.cmp, tt.sameOK)
		}
	}
	if !(Token{}).IsZero() || a1.IsZero() {
		t.Fatal("IsZero")
	}
	if _, err := (Token{}).MarshalText(); err == nil {
		t.Fatal("zero token marshalled")
	}
}

func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"/tenants/a/elections/b@1", "x%C3%A9@12", "a@0", "%@", "a%FF@1", "@@@", "a@1@2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err != nil {
			return
		}
		if tok.IsZero() || tok.Revision() <= 0 {
			t.Fatalf("ParseToken(%q) accepted invalid token %#v", s, tok)
		}
		// Exactly one encoding per token: the parsed token prints as its input.
		if tok.String() != s {
			t.Fatalf("ParseToken(%q).String() = %q", s, tok.String())
		}
	})
}
