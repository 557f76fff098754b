package efficiencylock

import (
	"strings"
	"unicode/utf8"
)

// MaxReasonLen is the longest declared reason, in bytes, that New accepts.
const MaxReasonLen = 256

// Reason is the declaration, required by New, that duplicate execution of the work
// guarded by a Locker is harmless. Build one with DuplicatesHarmless; the zero
// Reason is rejected by New. The reason is attached to every metric and log line
// of the Locker (attribute coordkit.efficiencylock.reason).
type Reason struct {
	why string
}

// DuplicatesHarmless declares why running the guarded work twice at the same time
// is acceptable ("cache warm-up: a second run only costs CPU"). The text is trimmed;
// an empty or whitespace-only reason makes New fail with a *ReasonError.
func DuplicatesHarmless(reason string) Reason {
	return Reason{why: strings.TrimSpace(reason)}
}

// String returns the declared reason.
func (r Reason) String() string { return r.why }

// validate reports why r cannot be used, or nil.
func (r Reason) validate() error {
	switch {
	case r.why == "":
		return &ReasonError{Problem: "empty: say why duplicate execution is harmless"}
	case len(r.why) > MaxReasonLen:
		return &ReasonError{Reason: r.why[:64], Problem: "longer than 256 bytes"}
	case !utf8.ValidString(r.why):
		return &ReasonError{Problem: "not valid UTF-8"}
	}
	return nil
}
