package admin

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// ErrInvalidArg matches every *ArgError: an argument coordctl refuses before
// it reaches a server (exit code 2, HTTP 400).
var ErrInvalidArg = errors.New("coordctl: invalid argument")

// ArgError is an argument that is not what it names: an id with a NUL or an
// invalid UTF-8 byte, a lease that is not a coordkit lease. Nothing was read.
type ArgError struct {
	Arg, Reason string
}

// Error names the argument and what is wrong with it.
func (e *ArgError) Error() string { return "coordctl: invalid " + e.Arg + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalidArg) true.
func (e *ArgError) Is(target error) bool { return target == ErrInvalidArg }

// maxIDBytes bounds an id argument (a saga id, an idempotency scope or key).
const maxIDBytes = 1024

// checkID refuses an id the database would answer with a raw error (a NUL,
// invalid UTF-8) or that cannot be one (empty, control characters, too long).
func checkID(arg, s string) error {
	bad := func(reason string) error { return &ArgError{Arg: arg, Reason: reason} }
	switch {
	case s == "":
		return bad("empty")
	case len(s) > maxIDBytes:
		return bad(fmt.Sprintf("%d bytes, over %d", len(s), maxIDBytes))
	case !utf8.ValidString(s):
		return bad(fmt.Sprintf("%q is not valid UTF-8", s))
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return bad(fmt.Sprintf("%q has the control character %U", s, r))
		}
	}
	return nil
}

// ErrPartial matches every *PartialError.
var ErrPartial = errors.New("coordctl: some of the state could not be read")

// PartialError says which parts of a view could not be read: the view was
// returned with them unknown (never zero), and the command exits non-zero
// (ExitBlind) after printing it.
type PartialError struct {
	Parts map[string]string // part -> why it is unknown
}

// Error names every unknown part and its cause.
func (e *PartialError) Error() string {
	var b strings.Builder
	b.WriteString("coordctl: blind: could not read ")
	for i, k := range slices.Sorted(maps.Keys(e.Parts)) {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(k + " (" + e.Parts[k] + ")")
	}
	b.WriteString(": what is shown for them is unknown, not zero")
	return b.String()
}

// Is makes errors.Is(err, ErrPartial) true.
func (e *PartialError) Is(target error) bool { return target == ErrPartial }

// partial returns a *PartialError for parts, or nil when none failed.
func partial(parts map[string]string) error {
	if len(parts) == 0 {
		return nil
	}
	return &PartialError{Parts: parts}
}
