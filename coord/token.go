package coord

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
	_ "unsafe" // for go:linkname: correctnesslease is the only minter of tokens.
)

// TokenHeader is the HTTP header (and gRPC metadata key, lower-cased) that carries a
// fencing token from a lease holder to the resource it writes to.
const TokenHeader = "Coord-Fencing-Token"

// maxLeaseLen bounds the lease name a token carries, in bytes.
const maxLeaseLen = 512

// Token is a fencing token: the name of a correctness lease and the etcd create
// revision of the holder's key. Create revisions are cluster-global and strictly
// increase with every grant, so a resource that remembers the highest token it has
// accepted for a lease can reject every write from an earlier holder.
//
// The zero Token is invalid and is rejected by every coordkit resource. There is no
// exported constructor: tokens are minted by correctnesslease when etcd grants a
// lease, and parsed with [ParseToken] when they arrive over the wire. Token is
// comparable and safe to copy.
type Token struct {
	lease string
	rev   int64
}

// newToken is the only constructor. correctnesslease reaches it through a linkname
// directive, so that no exported API builds a token from a name and a number.
//
//go:linkname newToken
func newToken(lease string, rev int64) Token { return Token{lease: lease, rev: rev} }

// Lease returns the name of the lease the token was granted for (the etcd election
// prefix, e.g. "/tenants/acme/elections/billing").
func (t Token) Lease() string { return t.lease }

// Revision returns the etcd create revision of the holder's key.
func (t Token) Revision() int64 { return t.rev }

// IsZero reports whether t is the zero (invalid) Token.
func (t Token) IsZero() bool { return t == Token{} }

// Compare orders two tokens of the same lease by revision: -1 if t is older than u,
// 0 if equal, +1 if newer. ok is false when the tokens belong to different leases,
// which are not ordered.
func (t Token) Compare(u Token) (cmp int, ok bool) {
	if t.lease != u.lease {
		return 0, false
	}
	switch {
	case t.rev < u.rev:
		return -1, true
	case t.rev > u.rev:
		return 1, true
	}
	return 0, true
}

// String returns the wire form of the token, "<lease>@<revision>", with every byte of
// the lease outside [A-Za-z0-9/._:~-] percent-encoded, so that it is a valid HTTP
// header value. ParseToken(t.String()) returns t.
func (t Token) String() string {
	var b strings.Builder
	b.Grow(len(t.lease) + 21)
	for i := 0; i < len(t.lease); i++ {
		c := t.lease[i]
		if tokenSafe(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte("0123456789ABCDEF"[c>>4])
		b.WriteByte("0123456789ABCDEF"[c&15])
	}
	b.WriteByte('@')
	b.WriteString(strconv.FormatInt(t.rev, 10))
	return b.String()
}

// MarshalText implements encoding.TextMarshaler with the wire form.
func (t Token) MarshalText() ([]byte, error) {
	if t.IsZero() {
		return nil, errors.New("coord: marshal zero token")
	}
	return []byte(t.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with [ParseToken].
func (t *Token) UnmarshalText(b []byte) error {
	p, err := ParseToken(string(b))
	if err != nil {
		return err
	}
	*t = p
	return nil
}

// ErrInvalidToken is returned (wrapped) by ParseToken for malformed input.
var ErrInvalidToken = errors.New("coord: invalid fencing token")

// ParseToken parses the wire form produced by [Token.String]. It rejects empty or
// oversized lease names, invalid percent-encoding, invalid UTF-8, control characters
// and revisions that are not positive decimal integers. Errors match ErrInvalidToken.
func ParseToken(s string) (Token, error) {
	at := strings.LastIndexByte(s, '@')
	if at < 0 {
		return Token{}, fmt.Errorf("%w: missing '@' in %q", ErrInvalidToken, truncate(s))
	}
	enc, revs := s[:at], s[at+1:]
	rev, err := strconv.ParseInt(revs, 10, 64)
	if err != nil || rev <= 0 || revs[0] == '+' || (len(revs) > 1 && revs[0] == '0') {
		return Token{}, fmt.Errorf("%w: revision %q is not a positive integer", ErrInvalidToken, truncate(revs))
	}
	var b strings.Builder
	for i := 0; i < len(enc); i++ {
		c := enc[i]
		switch {
		case c == '%':
			if i+2 >= len(enc) {
				return Token{}, fmt.Errorf("%w: truncated escape", ErrInvalidToken)
			}
			hi, ok1 := unhex(enc[i+1])
			lo, ok2 := unhex(enc[i+2])
			if !ok1 || !ok2 {
				return Token{}, fmt.Errorf("%w: bad escape %q", ErrInvalidToken, enc[i:i+3])
			}
			d := hi<<4 | lo
			if tokenSafe(d) {
				// Only one encoding per token: safe bytes are never escaped.
				return Token{}, fmt.Errorf("%w: needless escape %q", ErrInvalidToken, enc[i:i+3])
			}
			b.WriteByte(d)
			i += 2
		case tokenSafe(c):
			b.WriteByte(c)
		default:
			return Token{}, fmt.Errorf("%w: byte %q must be percent-encoded", ErrInvalidToken, c)
		}
	}
	lease := b.String()
	if err := validLease(lease); err != nil {
		return Token{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	return Token{lease: lease, rev: rev}, nil
}

// ValidateLease checks a lease name the way ParseToken checks the name a token
// carries: not empty, at most 512 bytes of valid UTF-8, no control characters.
// Errors match ErrInvalidToken.
func ValidateLease(lease string) error {
	if err := validLease(lease); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	return nil
}

func validLease(lease string) error {
	switch {
	case lease == "":
		return errors.New("empty lease name")
	case len(lease) > maxLeaseLen:
		return fmt.Errorf("lease name longer than %d bytes", maxLeaseLen)
	case !utf8.ValidString(lease):
		return errors.New("lease name is not valid UTF-8")
	}
	for _, r := range lease {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("lease name has control character %U", r)
		}
	}
	return nil
}

func tokenSafe(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '/' || c == '.' || c == '_' || c == ':' || c == '~' || c == '-'
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// truncate cuts an offending value to 64 bytes, on a rune boundary, for an
// error. coord imports nothing of coordkit's, so it keeps this cut instead of
// internal/pgtext.Clean: it never writes to a database, and its messages quote
// values with %q, which escapes NUL and invalid UTF-8.
func truncate(s string) string {
	if len(s) <= 64 {
		return s
	}
	n := 64
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
