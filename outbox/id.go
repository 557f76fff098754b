package outbox

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/internal/pgtext"
)

// ID is an event id: a UUIDv7 (RFC 9562), 48 bits of Unix milliseconds then 74
// random bits, so ids sort roughly by creation time and never collide in practice.
// It travels with the event to every broker (see HeaderEventID) and is what
// consumers dedupe on (Inbox.ProcessTx).
type ID [16]byte

// NewID returns a fresh UUIDv7 read from crypto/rand and the given time. It never
// blocks (crypto/rand does not fail on supported platforms; if it did, NewID panics,
// as crypto/rand.Read itself does since Go 1.24).
func NewID(now time.Time) ID {
	var id ID
	_, _ = rand.Read(id[6:])
	ms := uint64(now.UnixMilli())
	id[0] = byte(ms >> 40)
	id[1] = byte(ms >> 32)
	id[2] = byte(ms >> 24)
	id[3] = byte(ms >> 16)
	id[4] = byte(ms >> 8)
	id[5] = byte(ms)
	id[6] = 0x70 | (id[6] & 0x0f) // version 7
	id[8] = 0x80 | (id[8] & 0x3f) // variant 10
	return id
}

// String returns the canonical 36-character form, e.g.
// 0190f5d2-7a3c-7c1e-9f4b-2d1a3e5c7b90.
func (id ID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return string(b[:])
}

// Time returns the millisecond timestamp embedded in a UUIDv7.
func (id ID) Time() time.Time {
	ms := int64(id[0])<<40 | int64(id[1])<<32 | int64(id[2])<<24 | int64(id[3])<<16 | int64(id[4])<<8 | int64(id[5])
	return time.UnixMilli(ms)
}

// ParseID parses the canonical 36-character form. It returns an error wrapping
// ErrInvalidEvent for anything else.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, &EventError{Field: "id", Err: ErrInvalidID, Reason: fmt.Sprintf("%q is not a canonical UUID", pgtext.Clean(s, quoted))}
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	if _, err := hex.Decode(id[:], []byte(h)); err != nil {
		return ID{}, &EventError{Field: "id", Err: ErrInvalidID, Reason: err.Error()}
	}
	return id, nil
}
