package tokens

import (
	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
)

//corpus:negative
func RoundTrip(l *correctnesslease.Lease) (coord.Token, error) {
	return coord.ParseToken(l.Token().String())
}

//corpus:negative
func FromConfig(cfg map[string]string) (coord.Token, error) {
	return coord.ParseToken(cfg["fence"])
}
