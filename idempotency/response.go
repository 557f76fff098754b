package idempotency

import (
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"
)

// Response is what a request produced and what a replay returns: a status code,
// the selected headers and the body, stored byte for byte.
type Response struct {
	Status int         // e.g. an HTTP status code; the gRPC interceptor stores 0
	Header http.Header // only the headers worth replaying (Location, Content-Type, ...)
	Body   []byte
}

// Result is the outcome of Do, DoTx and Run.
type Result struct {
	Response Response
	// Replayed is true when the response was stored by an earlier request with the
	// same key and the effect did not run now.
	Replayed bool
}

// rawHeader starts a stored header that is not UTF-8 throughout: the byte, then a
// JSON list of [name, value] pairs in base64, since a JSON string would turn every
// invalid byte into U+FFFD. A header that is UTF-8 throughout is stored as plain
// JSON, which always starts with '{'.
const rawHeader = 0x01

func encodeHeader(h http.Header) ([]byte, error) {
	if len(h) == 0 {
		return nil, nil
	}
	if utf8Header(h) {
		return json.Marshal(h)
	}
	var raw [][2][]byte
	for k, vs := range h {
		for _, v := range vs {
			raw = append(raw, [2][]byte{[]byte(k), []byte(v)})
		}
	}
	b, err := json.Marshal(raw)
	return append([]byte{rawHeader}, b...), err
}

func utf8Header(h http.Header) bool {
	for k, vs := range h {
		if !utf8.ValidString(k) {
			return false
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return false
			}
		}
	}
	return true
}

func decodeHeader(b []byte) (http.Header, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var h http.Header
	if b[0] != rawHeader {
		if err := json.Unmarshal(b, &h); err != nil {
			return nil, fmt.Errorf("idempotency: stored header: %w", err)
		}
		return h, nil
	}
	var raw [][2][]byte
	if err := json.Unmarshal(b[1:], &raw); err != nil {
		return nil, fmt.Errorf("idempotency: stored header: %w", err)
	}
	h = http.Header{}
	for _, kv := range raw {
		h[string(kv[0])] = append(h[string(kv[0])], string(kv[1]))
	}
	return h, nil
}

func (s *Store) checkSize(r *Response) ([]byte, error) {
	hdr, err := encodeHeader(r.Header)
	if err != nil {
		return nil, err
	}
	if n := len(hdr) + len(r.Body); n > s.cfg.MaxResponseBytes {
		return nil, fmt.Errorf("%w: %d bytes > %d", ErrResponseTooLarge, n, s.cfg.MaxResponseBytes)
	}
	return hdr, nil
}
