package idempotency

import (
	"encoding/json"
	"fmt"
	"net/http"
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

func encodeHeader(h http.Header) ([]byte, error) {
	if len(h) == 0 {
		return nil, nil
	}
	return json.Marshal(h)
}

func decodeHeader(b []byte) (http.Header, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var h http.Header
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("idempotency: stored header: %w", err)
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
