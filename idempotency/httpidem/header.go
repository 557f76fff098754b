package httpidem

import (
	"errors"
	"fmt"
	"strings"

	"github.com/coordkit/coordkit/idempotency"
)

// HeaderName is the request header of the IETF draft
// (draft-ietf-httpapi-idempotency-key-header).
const HeaderName = "Idempotency-Key"

// ReplayedHeader marks a response that was replayed from storage, not produced now.
const ReplayedHeader = "Idempotent-Replayed"

// ErrMissingKey: the request has no Idempotency-Key header (HTTP 400 when required).
var ErrMissingKey = errors.New("httpidem: missing Idempotency-Key header")

// ParseKey parses the Idempotency-Key field values of one request. The draft makes
// the field a Structured Field Item whose bare item is an sf-string (RFC 8941):
// `"8e03978e-40d5-43e8-bc93-6894a57f9324"`. ParseKey accepts that form with optional
// parameters (ignored) and surrounding spaces. Unless strict, it also accepts a bare
// token of tchar, ":", "/" and "=" characters (what many clients send: an unquoted
// UUID). The key must then be 1..255 bytes of printable ASCII.
//
// It returns ErrMissingKey for no value, and an error matching
// idempotency.ErrInvalidKey for several field lines, bad syntax or a bad key.
func ParseKey(values []string, strict bool) (string, error) {
	switch len(values) {
	case 0:
		return "", ErrMissingKey
	case 1:
	default:
		return "", invalid("the field appears more than once")
	}
	v := strings.Trim(values[0], " \t")
	if v == "" {
		return "", invalid("empty value")
	}
	var key string
	if v[0] == '"' {
		k, rest, err := parseString(v)
		if err != nil {
			return "", err
		}
		if err := parseParams(rest); err != nil {
			return "", err
		}
		key = k
	} else {
		if strict {
			return "", invalid("must be a quoted sf-string")
		}
		for i := 0; i < len(v); i++ {
			if !isTokenChar(v[i]) {
				return "", invalid(fmt.Sprintf("byte %#02x not allowed in an unquoted key", v[i]))
			}
		}
		key = v
	}
	if err := idempotency.ValidateKeyID(key); err != nil {
		return "", err
	}
	return key, nil
}

func invalid(reason string) error {
	return &idempotency.KeyError{Field: "Idempotency-Key", Reason: reason}
}

// parseString parses an sf-string at the start of s and returns it and the rest.
func parseString(s string) (string, string, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			i++
			if i == len(s) || (s[i] != '"' && s[i] != '\\') {
				return "", "", invalid(`bad escape in sf-string (only \" and \\)`)
			}
			b.WriteByte(s[i])
		case c == '"':
			return b.String(), s[i+1:], nil
		case c < 0x20 || c > 0x7e:
			return "", "", invalid(fmt.Sprintf("byte %#02x not allowed in an sf-string", c))
		default:
			b.WriteByte(c)
		}
	}
	return "", "", invalid("unterminated sf-string")
}

// parseParams checks that s is a valid list of sf-parameters (";" key ["=" bare-item]).
func parseParams(s string) error {
	for s != "" {
		if s[0] != ';' {
			return invalid("unexpected data after the sf-string")
		}
		s = strings.TrimLeft(s[1:], " ")
		n := 0
		for n < len(s) && (s[n] >= 'a' && s[n] <= 'z' || s[n] == '*' || n > 0 && (s[n] >= '0' && s[n] <= '9' || strings.IndexByte("_-.", s[n]) >= 0)) {
			n++
		}
		if n == 0 {
			return invalid("bad parameter key")
		}
		s = s[n:]
		if s == "" || s[0] != '=' {
			continue // boolean true parameter
		}
		s = s[1:]
		if s == "" {
			return invalid("empty parameter value")
		}
		if s[0] == '"' {
			_, rest, err := parseString(s)
			if err != nil {
				return err
			}
			s = rest
			continue
		}
		m := 0
		for m < len(s) && s[m] != ';' {
			if !isTokenChar(s[m]) && s[m] != '?' {
				return invalid("bad parameter value")
			}
			m++
		}
		if m == 0 {
			return invalid("empty parameter value")
		}
		s = s[m:]
	}
	return nil
}

func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~:/=", c) >= 0
}
