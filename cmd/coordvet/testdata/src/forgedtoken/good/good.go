package good

import (
	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
)

type alias = coord.Token

func fromWire(header string) (coord.Token, error) { return coord.ParseToken(header) }

func fromLease(l *correctnesslease.Lease) coord.Token {
	tok := l.Token()
	return coord.Token(tok) // converting a token to its own type forges nothing
}

func viaAlias(t alias) coord.Token { return t }

func zero() coord.Token {
	var zero coord.Token
	return zero
}

// Zero checks compare with the zero token; they build no token anyone uses.
func zeroChecks(tok coord.Token, toks []coord.Token, p *coord.Token) bool {
	if tok != (coord.Token{}) {
		return true
	}
	switch tok {
	case coord.Token{}:
		return false
	}
	return toks[0] == coord.Token{} || *p != (coord.Token{}) || coord.Token{} == tok
}
