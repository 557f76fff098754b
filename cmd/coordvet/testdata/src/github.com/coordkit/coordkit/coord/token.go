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
