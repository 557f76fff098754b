package correctnesslease

import (
	_ "unsafe" // for go:linkname: this package is the only minter of coord.Token.

	"github.com/coordkit/coordkit/coord"
)

// newToken is coord's unexported Token constructor. Only this package mints tokens,
// from the election prefix and the create revision of the holder's key.
//
//go:linkname newToken github.com/coordkit/coordkit/coord.newToken
func newToken(lease string, rev int64) coord.Token
