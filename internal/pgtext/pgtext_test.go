package pgtext_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/coordkit/coordkit/internal/pgtext"
)

func check(t *testing.T, in string, max int, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("Clean(%q, %d) = %q: invalid UTF-8", in, max, out)
	}
	if strings.IndexByte(out, 0) >= 0 {
		t.Fatalf("Clean(%q, %d) = %q: contains NUL", in, max, out)
	}
	if max >= 0 && len(out) > max {
		t.Fatalf("Clean(%q, %d) = %q: %d bytes", in, max, out, len(out))
	}
	clean := utf8.ValidString(in) && strings.IndexByte(in, 0) < 0
	if clean && (max < 0 || len(in) <= max) && out != in {
		t.Fatalf("Clean(%q, %d) = %q: changed a storable string", in, max, out)
	}
	// The result is a prefix of the repaired input, plus the mark if it was cut.
	full := pgtext.Clean(in, -1)
	body := out
	if out != full {
		body = strings.TrimSuffix(out, pgtext.Ellipsis)
		if max >= len(pgtext.Ellipsis) && body == out {
			t.Fatalf("Clean(%q, %d) = %q: cut without the mark", in, max, out)
		}
	}
	if !strings.HasPrefix(full, body) {
		t.Fatalf("Clean(%q, %d) = %q: not a prefix of %q", in, max, out, full)
	}
	// Cut as late as possible: the next rune would not have fitted.
	if out != full && max >= len(pgtext.Ellipsis) {
		r, size := utf8.DecodeRuneInString(full[len(body):])
		if r != utf8.RuneError || size > 0 {
			if len(body)+size+len(pgtext.Ellipsis) <= max {
				t.Fatalf("Clean(%q, %d) = %q: cut earlier than needed", in, max, out)
			}
		}
	}
}

func TestClean(t *testing.T) {
	cases := []struct {
		in   string
		max  int
		want string
	}{
		{"plain", 10, "plain"},
		{"plain", -1, "plain"},
		{"", 0, ""},
		{"a\x00b", -1, "a\uFFFDb"},
		{"a\xffb", -1, "a\uFFFDb"},
		{"a\xff\xfe\xfdb", -1, "a\uFFFDb"},
		{"\xe2\x82", -1, "\uFFFD"}, // a rune cut mid-way
		{"abcdef", 5, "ab…"},
		{"ab€def", 6, "ab…"}, // "€" is 3 bytes: it does not fit before the mark
		{"ab€defg", 8, "ab€…"},
		{"€€€", 2, ""}, // too small for the mark: cut unmarked, on a boundary
		{"a€", 2, "a"},
		{strings.Repeat("a", 1999) + "€", 2000, strings.Repeat("a", 1997) + "…"},
	}
	for _, c := range cases {
		got := pgtext.Clean(c.in, c.max)
		if got != c.want {
			t.Errorf("Clean(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
		check(t, c.in, c.max, got)
	}
}

func FuzzClean(f *testing.F) {
	for _, s := range []string{"", "a", "a\x00b", "\xff", "€", "ab€def", strings.Repeat("ошибка ", 40), "\xed\xa0\x80", "\xf4\x90\x80\x80"} {
		for _, max := range []int{-1, 0, 1, 2, 3, 4, 7, 64, 2000} {
			f.Add(s, max)
		}
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max > 1<<20 {
			max = 1 << 20
		}
		check(t, s, max, pgtext.Clean(s, max))
	})
}

func TestCleanDoesNotAllocateForStorableStrings(t *testing.T) {
	s := strings.Repeat("storable ", 10)
	if n := testing.AllocsPerRun(100, func() { _ = pgtext.Clean(s, 1000) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
