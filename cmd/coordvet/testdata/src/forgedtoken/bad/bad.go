package bad

import (
	"unsafe"
	_ "unsafe"

	"github.com/coordkit/coordkit/coord"
)

type myToken struct {
	lease string
	rev   int64
}

func forge() coord.Token {
	t := myToken{lease: "billing", rev: 1 << 40}
	return *(*coord.Token)(unsafe.Pointer(&t)) // want `forgedtoken: a conversion to \*coord.Token builds a token no lease granted; fix: use Lease.Token\(\) or Run's token; parse only text from outside \(RFC MUST 3\)`
}

func zero() coord.Token {
	return coord.Token{} // want `coord.Token composite literal builds a token no lease granted`
}

func inSlice() []coord.Token {
	return []coord.Token{{}} // want `coord.Token composite literal`
}

//go:linkname newToken github.com/coordkit/coordkit/coord.newToken // want `go:linkname into package coord`
func newToken(lease string, rev int64) coord.Token

func suppressed() coord.Token {
	return coord.Token{} //coordvet:ignore forgedtoken owner=platform expires=2026-09-30 placeholder for the wire decoder's unit test
}
