package fix

import "github.com/coordkit/coordkit/coord"

func unset(tok coord.Token) bool { return tok == coord.Token{} } // want `use tok.IsZero\(\)`

func set(toks []coord.Token) bool { return toks[0] != (coord.Token{}) } // want `use !toks\[0\].IsZero\(\)`
