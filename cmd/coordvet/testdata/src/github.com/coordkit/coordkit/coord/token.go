// Package coord is a stub of the coordkit vocabulary.
package coord

type Token struct {
	lease string
	rev   int64
}

func ParseToken(s string) (Token, error) { return Token{lease: s}, nil }

func (t Token) String() string { return t.lease }

func newToken(lease string, rev int64) Token { return Token{lease, rev} }

var _ = newToken

func (t Token) IsZero() bool { return t.rev == 0 }

func (t Token) Revision() int64 { return t.rev }

func (t *Token) UnmarshalText(b []byte) error { return nil }

func (t Token) MarshalText() ([]byte, error) { return []byte(t.lease), nil }
