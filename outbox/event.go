package outbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/coordkit/coordkit/internal/pgtext"
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
		if reason := pgtext.CheckJSONB(payload); reason != "" {
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
