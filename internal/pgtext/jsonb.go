package pgtext

import "bytes"

// PostgreSQL numeric limits: up to 131072 digits before the decimal point and
// 16383 after it.
const (
	pgNumericMaxWeight = 131072
	pgNumericMaxScale  = 16383
)

// CheckJSONB returns why PostgreSQL's jsonb would refuse b, which must already be
// valid JSON (json.Valid), or "" if jsonb accepts it. jsonb rejects what JSON
// allows in three places: the \u0000 escape (22P05; encoding/json writes a NUL
// byte that way), unpaired UTF-16 surrogate escapes (22P05) and numbers outside
// numeric's range (22003). Use it wherever coordkit writes JSON to a jsonb column.
func CheckJSONB(b []byte) string {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			i++
			for ; i < len(b) && b[i] != '"'; i++ {
				if b[i] != '\\' {
					continue
				}
				i++
				if i >= len(b) || b[i] != 'u' {
					continue
				}
				r, ok := hex4(b, i+1)
				if !ok {
					return "bad \\u escape"
				}
				i += 4
				switch {
				case r == 0:
					return "contains \\u0000, which PostgreSQL jsonb rejects"
				case r >= 0xD800 && r <= 0xDBFF:
					// must be followed by \uDC00-\uDFFF
					if i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
						if lo, ok := hex4(b, i+3); ok && lo >= 0xDC00 && lo <= 0xDFFF {
							i += 6
							continue
						}
					}
					return "unpaired high surrogate escape"
				case r >= 0xDC00 && r <= 0xDFFF:
					return "unpaired low surrogate escape"
				}
			}
		case c == '-' || (c >= '0' && c <= '9'):
			j := i
			for j < len(b) && bytes.IndexByte([]byte("+-0123456789.eE"), b[j]) >= 0 {
				j++
			}
			if reason := numberOutOfRange(b[i:j]); reason != "" {
				return reason
			}
			i = j - 1
		}
	}
	return ""
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}

// numberOutOfRange checks a JSON number token against PostgreSQL's numeric range
// (conservatively: it may reject a few extreme values PostgreSQL would round).
func numberOutOfRange(n []byte) string {
	if len(n) > 0 && n[0] == '-' {
		n = n[1:]
	}
	mant, exp := n, int64(0)
	if k := bytes.IndexAny(n, "eE"); k >= 0 {
		mant = n[:k]
		e := n[k+1:]
		neg := false
		if len(e) > 0 && (e[0] == '+' || e[0] == '-') {
			neg = e[0] == '-'
			e = e[1:]
		}
		for _, c := range e {
			exp = exp*10 + int64(c-'0')
			if exp > 1<<30 {
				return "number exponent out of PostgreSQL numeric range"
			}
		}
		if neg {
			exp = -exp
		}
	}
	intPart, frac := mant, []byte(nil)
	if k := bytes.IndexByte(mant, '.'); k >= 0 {
		intPart, frac = mant[:k], mant[k+1:]
	}
	intPart = bytes.TrimLeft(intPart, "0")
	if int64(len(intPart))+exp > pgNumericMaxWeight && (len(intPart) > 0 || len(bytes.Trim(frac, "0")) > 0) {
		return "number too large for PostgreSQL numeric"
	}
	if int64(len(frac))-exp > pgNumericMaxScale {
		return "number has too many decimal digits for PostgreSQL numeric"
	}
	return ""
}
