package pgfence

import (
	"errors"
	"fmt"

	"github.com/coordkit/coordkit/coord"
)

// ErrZeroToken is returned when a write presents the zero coord.Token. It also
// matches coord.ErrInvalidToken. Nothing is written.
var ErrZeroToken = fmt.Errorf("pgfence: zero fencing token: %w", coord.ErrInvalidToken)

// ErrRowNotFound is returned (wrapped) by [RowUpdater.Update] when no row has the
// given key, as opposed to a row whose fence is newer than the token (which is a
// [*coord.StaleTokenError]).
var ErrRowNotFound = errors.New("pgfence: no row matches the key")

// staleError builds the typed rejection. The highest token is parsed from the wire
// form: a resource learns tokens, it never mints them.
func staleError(presented coord.Token, highest int64) error {
	s := presented.String()
	wire := s[:len(s)-len(fmt.Sprint(presented.Revision()))] + fmt.Sprint(highest)
	h, err := coord.ParseToken(wire)
	if err != nil { // cannot happen: same lease, positive revision
		return fmt.Errorf("pgfence: stale token %s (highest revision %d): %w", presented, highest, coord.ErrStaleToken)
	}
	return &coord.StaleTokenError{Presented: presented, Highest: h}
}
