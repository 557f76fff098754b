package badfeature

import "github.com/coordkit/coordkit/ownership"

// group uses a composite from a feature: only a composite made of ownership may.
var _ *ownership.Member
