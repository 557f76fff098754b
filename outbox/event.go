package outbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// Event is what a producer enqueues. Field names map to the Debezium outbox
// columns: Topic → aggregatetype, Key → aggregateid, Type → type, Payload → payload.
type Event struct {
	// Topic routes the event (Kafka topic, NATS subject); column aggregatetype. Required.
	Topic string
	// Key is the aggregate id; events of one key are published in enqueue order and
	// are the Kafka record key. Column aggregateid. Required.
	Key string
	// Type names the event (e.g. "order.created"); column type. Required.
	Type string
	// Payload is the body. It must be valid UTF-8 without NUL bytes (the column is
	// text); when JSON is true it must also be JSON that PostgreSQL's jsonb accepts.
	Payload []byte
	// JSON declares the payload to be JSON and has it validated as such.
	JSON bool
	// Headers travel with the event to the broker. The trace context of the
	// EnqueueTx context is added to them (Config.Propagator).
	Headers map[string]string
}

// Message is an event as a Publisher sees it.
type Message struct {
	ID        ID                // event id; brokers carry it as HeaderEventID (Nats-Msg-Id on JetStream)
	Seq       int64             // position in the outbox; increases with enqueue order per key
	Topic     string            // aggregatetype
	Key       string            // aggregateid
	Type      string            // type
	Payload   []byte            // payload
	Headers   map[string]string // user headers plus trace context
	CreatedAt time.Time         // when it was enqueued (database clock)
	Attempt   int               // 1 for the first publish attempt
}

// Header names every publisher sets.
const (
	HeaderEventID   = "event-id"
	HeaderEventType = "event-type"
)

// Field size limits (bytes).
const (
	MaxTopicBytes  = 255
	MaxKeyBytes    = 512
	MaxTypeBytes   = 255
	MaxHeaderBytes = 8 << 10 // all header names and values together
)

// ValidatePayload reports whether payload may be stored: valid UTF-8 without NUL,
// at most max bytes (max <= 0: no limit) and, if isJSON, JSON that PostgreSQL's
// jsonb accepts (no \u0000, no unpaired surrogate escapes, numbers within numeric
// range). It returns nil or an *EventError. It does not block.
func ValidatePayload(payload []byte, isJSON bool, max int) error {
	if max > 0 && len(payload) > max {
		return &EventError{Field: "payload", Err: ErrPayloadTooLarge, Reason: fmt.Sprintf("%d bytes > limit %d", len(payload), max)}
	}
	if !utf8.Valid(payload) {
		return &EventError{Field: "payload", Err: ErrInvalidUTF8, Reason: "not valid UTF-8"}
	}
	if bytes.IndexByte(payload, 0) >= 0 {
		return &EventError{Field: "payload", Err: ErrInvalidUTF8, Reason: "contains a NUL byte"}
	}
	if isJSON {
		if !json.Valid(payload) {
			return &EventError{Field: "payload", Err: ErrInvalidJSON, Reason: "not valid JSON"}
		}
		if reason := jsonbIncompatible(payload); reason != "" {
			return &EventError{Field: "payload", Err: ErrInvalidJSON, Reason: reason}
		}
	}
	return nil
}

func validateText(field, s string, max int, sentinelEmpty bool) error {
	if sentinelEmpty && s == "" {
		return &EventError{Field: field, Err: ErrEmptyField, Reason: "must not be empty"}
	}
	if len(s) > max {
		return &EventError{Field: field, Err: ErrFieldTooLong, Reason: fmt.Sprintf("%d bytes > %d", len(s), max)}
	}
	if !utf8.ValidString(s) {
		return &EventError{Field: field, Err: ErrInvalidUTF8, Reason: "not valid UTF-8"}
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return &EventError{Field: field, Err: ErrInvalidUTF8, Reason: "contains a NUL byte"}
		}
	}
	return nil
}

// validate checks e against the limits; maxPayload <= 0 means no payload limit.
func (e *Event) validate(maxPayload int) error {
	if err := validateText("topic", e.Topic, MaxTopicBytes, true); err != nil {
		return err
	}
	if err := validateText("key", e.Key, MaxKeyBytes, true); err != nil {
		return err
	}
	if err := validateText("type", e.Type, MaxTypeBytes, true); err != nil {
		return err
	}
	total := 0
	for k, v := range e.Headers {
		total += len(k) + len(v)
		if err := validateText("headers", k, MaxHeaderBytes, true); err != nil {
			return err
		}
		if err := validateText("headers", v, MaxHeaderBytes, false); err != nil {
			return err
		}
	}
	if total > MaxHeaderBytes {
		return &EventError{Field: "headers", Err: ErrFieldTooLong, Reason: fmt.Sprintf("%d bytes > %d", total, MaxHeaderBytes)}
	}
	return ValidatePayload(e.Payload, e.JSON, maxPayload)
}

// PostgreSQL numeric limits: up to 131072 digits before the decimal point and
// 16383 after it.
const (
	pgNumericMaxWeight = 131072
	pgNumericMaxScale  = 16383
)

// jsonbIncompatible returns why PostgreSQL's jsonb would refuse already-valid JSON
// b, or "" if it accepts it. jsonb rejects the \u0000 escape, unpaired UTF-16
// surrogate escapes and numbers outside the numeric range.
func jsonbIncompatible(b []byte) string {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			i++
			for ; i < len(b) && b[i] != '"'; i++ {
				if b[i] != '\\' {
					continue
				}
				i++
				if i >= len(b) || b[i] != 'u' {
					continue
				}
				r, ok := hex4(b, i+1)
				if !ok {
					return "bad \\u escape"
				}
				i += 4
				switch {
				case r == 0:
					return "contains \\u0000, which PostgreSQL jsonb rejects"
				case r >= 0xD800 && r <= 0xDBFF:
					// must be followed by \uDC00-\uDFFF
					if i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
						if lo, ok := hex4(b, i+3); ok && lo >= 0xDC00 && lo <= 0xDFFF {
							i += 6
							continue
						}
					}
					return "unpaired high surrogate escape"
				case r >= 0xDC00 && r <= 0xDFFF:
					return "unpaired low surrogate escape"
				}
			}
		case c == '-' || (c >= '0' && c <= '9'):
			j := i
			for j < len(b) && bytes.IndexByte([]byte("+-0123456789.eE"), b[j]) >= 0 {
				j++
			}
			if reason := numberOutOfRange(b[i:j]); reason != "" {
				return reason
			}
			i = j - 1
		}
	}
	return ""
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}

// numberOutOfRange checks a JSON number token against PostgreSQL's numeric range
// (conservatively: it may reject a few extreme values PostgreSQL would round).
func numberOutOfRange(n []byte) string {
	if len(n) > 0 && n[0] == '-' {
		n = n[1:]
	}
	mant, exp := n, int64(0)
	if k := bytes.IndexAny(n, "eE"); k >= 0 {
		mant = n[:k]
		e := n[k+1:]
		neg := false
		if len(e) > 0 && (e[0] == '+' || e[0] == '-') {
			neg = e[0] == '-'
			e = e[1:]
		}
		for _, c := range e {
			exp = exp*10 + int64(c-'0')
			if exp > 1<<30 {
				return "number exponent out of PostgreSQL numeric range"
			}
		}
		if neg {
			exp = -exp
		}
	}
	intPart, frac := mant, []byte(nil)
	if k := bytes.IndexByte(mant, '.'); k >= 0 {
		intPart, frac = mant[:k], mant[k+1:]
	}
	intPart = bytes.TrimLeft(intPart, "0")
	if int64(len(intPart))+exp > pgNumericMaxWeight && (len(intPart) > 0 || len(bytes.Trim(frac, "0")) > 0) {
		return "number too large for PostgreSQL numeric"
	}
	if int64(len(frac))-exp > pgNumericMaxScale {
		return "number has too many decimal digits for PostgreSQL numeric"
	}
	return ""
}
