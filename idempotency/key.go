package idempotency

import (
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/coordkit/coordkit/internal/pgtext"
)

// Limits on keys, in bytes.
const (
	MaxScopeLen = 200 // tenant / principal
	MaxKeyLen   = 255 // the client's key, as the IETF draft suggests
)

// Key identifies one idempotent request: the client's key within a scope (tenant or
// principal). Scope and ID are stored in separate primary-key columns, so two
// different (Scope, ID) pairs never collide, whatever bytes they contain.
type Key struct {
	Scope string // tenant / principal; 1..MaxScopeLen bytes, printable UTF-8
	ID    string // the client's key; 1..MaxKeyLen bytes, printable ASCII
}

// String returns "scope/id" quoted, for messages only (never as a storage key).
func (k Key) String() string { return strconv.Quote(k.Scope) + "/" + strconv.Quote(k.ID) }

// Validate checks the key: Scope is 1..MaxScopeLen bytes of valid UTF-8 without
// control characters; ID is 1..MaxKeyLen bytes of printable ASCII (0x20..0x7E).
// It returns a *KeyError matching ErrInvalidKey.
func (k Key) Validate() error {
	if err := validateScope(k.Scope); err != nil {
		return err
	}
	return ValidateKeyID(k.ID)
}

func validateScope(s string) error {
	bad := func(reason string) error {
		return &KeyError{Field: "scope", Value: pgtext.Clean(s, 64), Reason: reason}
	}
	switch {
	case s == "":
		return bad("empty")
	case len(s) > MaxScopeLen:
		return bad("longer than " + strconv.Itoa(MaxScopeLen) + " bytes")
	case !utf8.ValidString(s):
		return bad("not valid UTF-8")
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return bad("contains a non-printable character")
		}
	}
	return nil
}

// ValidateKeyID checks a client key: 1..MaxKeyLen bytes, every byte printable ASCII
// (0x20..0x7E), which is what an sf-string can carry. It returns a *KeyError.
func ValidateKeyID(id string) error {
	bad := func(reason string) error { return &KeyError{Field: "key", Value: pgtext.Clean(id, 64), Reason: reason} }
	switch {
	case id == "":
		return bad("empty")
	case len(id) > MaxKeyLen:
		return bad("longer than " + strconv.Itoa(MaxKeyLen) + " bytes")
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x20 || id[i] > 0x7e {
			return bad("contains a byte outside printable ASCII")
		}
	}
	return nil
}
