package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// Fingerprint is the SHA-256 of a canonical request. Two requests with the same key
// must have equal fingerprints, or the second gets a *MismatchError.
type Fingerprint [32]byte

// String returns the fingerprint in hex.
func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// ErrInvalidBody: a body given to FingerprintJSON is not valid UTF-8 or not one
// valid JSON value. Returned wrapped; the HTTP middleware answers 400.
var ErrInvalidBody = errors.New("idempotency: invalid request body")

// FingerprintOf hashes parts with their lengths, so the boundaries between parts are
// part of the hash ("ab","c" and "a","bc" differ).
func FingerprintOf(parts ...[]byte) Fingerprint {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	var f Fingerprint
	h.Sum(f[:0])
	return f
}

// FingerprintJSON returns the fingerprint of a request whose body is JSON: the
// method, the path and the canonical form of the body (CanonicalJSON), so object
// field order and insignificant whitespace do not change it. An empty body is
// allowed. It returns an error matching ErrInvalidBody for invalid UTF-8 or JSON.
func FingerprintJSON(method, path string, body []byte) (Fingerprint, error) {
	var canon []byte
	if len(bytes.TrimSpace(body)) > 0 {
		var err error
		if canon, err = CanonicalJSON(body); err != nil {
			return Fingerprint{}, err
		}
	}
	return FingerprintOf([]byte(method), []byte(path), canon), nil
}

// CanonicalJSON re-encodes one JSON value canonically: object keys sorted, no
// insignificant whitespace, numbers kept exactly as written (1.0 and 1 differ),
// strings re-escaped uniformly. Duplicate object keys keep the last value, as
// encoding/json does. It rejects invalid UTF-8 (which encoding/json would silently
// replace, making different bodies equal), invalid JSON and trailing data, with an
// error matching ErrInvalidBody.
func CanonicalJSON(body []byte) ([]byte, error) {
	if !utf8.Valid(body) {
		return nil, fmt.Errorf("%w: not valid UTF-8", ErrInvalidBody)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidBody, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the JSON value", ErrInvalidBody)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // maps encode with sorted keys
		return nil, fmt.Errorf("%w: %v", ErrInvalidBody, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
