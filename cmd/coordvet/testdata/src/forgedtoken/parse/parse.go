package parse

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
)

func FromConstant() (coord.Token, error) {
	return coord.ParseToken("billing@9223372036854775807") // want `forgedtoken: ParseToken of a constant forges a token`
}

func FromNumber(rev int64) (coord.Token, error) {
	return coord.ParseToken(fmt.Sprintf("billing@%d", rev)) // want `ParseToken of a formatted number forges a token`
}

func FromStrconv(rev int64) (coord.Token, error) {
	text := "billing@" + strconv.FormatInt(rev, 10)
	return coord.ParseToken(text) // want `ParseToken of a formatted number`
}

func Unmarshal() (coord.Token, error) {
	var tok coord.Token
	err := tok.UnmarshalText([]byte("billing@42")) // want `UnmarshalText of a constant forges a token`
	return tok, err
}

// Corrected: text received from outside the process, or a real token's.

func FromHeader(r *http.Request) (coord.Token, error) {
	return coord.ParseToken(r.Header.Get("Coord-Fencing-Token"))
}

func FromParam(text string) (coord.Token, error) { return coord.ParseToken(text) }

func RoundTrip(l *correctnesslease.Lease) (coord.Token, error) {
	return coord.ParseToken(l.Token().String())
}

func FromBody(b []byte) (coord.Token, error) {
	var tok coord.Token
	return tok, tok.UnmarshalText(b)
}

// The zero token beside an error is no token at all.
func ZeroWithError(r *http.Request) (coord.Token, error) {
	tok, err := coord.ParseToken(r.Header.Get("Coord-Fencing-Token"))
	if err != nil {
		return coord.Token{}, err
	}
	return tok, nil
}

func ZeroAsSuccess() (coord.Token, error) {
	return coord.Token{}, nil // want `a coord.Token composite literal builds a token no lease granted`
}

func IsUnset(tok coord.Token) bool {
	return tok == coord.Token{} // a zero check (seen in an outside corpus: was a false finding)
}
