// Package mint is SDK code: it may build tokens (no findings).
package mint

import (
	_ "unsafe"

	"github.com/coordkit/coordkit/coord"
)

//go:linkname newToken github.com/coordkit/coordkit/coord.newToken
func newToken(lease string, rev int64) coord.Token

func Zero() coord.Token { return coord.Token{} }
