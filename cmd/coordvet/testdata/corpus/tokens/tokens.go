// Package tokens is the ledger service's side of the fence: it receives
// tokens over the wire, and sometimes builds them when it should not.
package tokens

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/coordkit/coordkit/coord"
)

// Restore rebuilds a token from a revision kept in its own table.
func Restore(lease string, rev int64) (coord.Token, error) {
	return coord.ParseToken(fmt.Sprintf("%s@%d", lease, rev)) // corpus: forgedtoken
}

// Max claims the highest possible revision.
func Max() (coord.Token, error) {
	return coord.ParseToken("/tenants/acme/elections/billing@9223372036854775807") // corpus: forgedtoken
}

// FromCounter computes the text from a counter.
func FromCounter(lease string, n int) (coord.Token, error) {
	text := lease + "@" + strconv.Itoa(n)
	return coord.ParseToken(text) // corpus: forgedtoken
}

// Decode unmarshals a literal.
func Decode() (coord.Token, error) {
	var tok coord.Token
	err := tok.UnmarshalText([]byte("/tenants/acme/elections/billing@42")) // corpus: forgedtoken
	return tok, err
}

// Placeholder returns the zero token as if it were one.
func Placeholder() coord.Token {
	return coord.Token{} // corpus: forgedtoken
}

// Corrected cases.

// Unset is a zero check: it builds no token anyone presents (it was a false
// finding on an outside corpus).
//
//corpus:negative
func Unset(tok coord.Token) bool {
	return tok == coord.Token{}
}

//corpus:negative
func Set(tok coord.Token) bool {
	return tok != (coord.Token{})
}

//corpus:negative
func FromRequest(r *http.Request) (coord.Token, error) {
	tok, err := coord.ParseToken(r.Header.Get(coord.TokenHeader))
	if err != nil {
		return coord.Token{}, err
	}
	return tok, nil
}

//corpus:negative
func FromBody(r *http.Request) (coord.Token, error) {
	var body struct {
		Token coord.Token `json:"token"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		return coord.Token{}, fmt.Errorf("decode: %w", err)
	}
	return body.Token, nil
}

//corpus:negative
func FromText(b []byte) (coord.Token, error) {
	var tok coord.Token
	if err := tok.UnmarshalText(b); err != nil {
		return coord.Token{}, err
	}
	return tok, nil
}

//corpus:negative
func IsSet(tok coord.Token) bool { return !tok.IsZero() }

//corpus:negative
func Zero() coord.Token {
	var zero coord.Token
	return zero
}
