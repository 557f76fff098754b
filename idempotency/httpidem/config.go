package httpidem

import (
	"cmp"
	"log/slog"
	"net/http"

	"github.com/coordkit/coordkit/idempotency"
)

// Config configures Middleware. Scope is required; every other field states its
// default.
type Config struct {
	// Scope returns the tenant or principal a request's key belongs to (keys of two
	// scopes never collide). An error answers 400 (use your auth middleware before
	// this one to answer 401/403). Required.
	Scope func(r *http.Request) (string, error)
	// Optional lets requests without Idempotency-Key through, unprotected (the
	// handler then finds no transaction in its context). Default false: 400.
	Optional bool
	// Strict accepts only the quoted sf-string form of the header. Default false:
	// bare tokens (an unquoted UUID) are accepted too.
	Strict bool
	// Methods are the methods the middleware protects; others pass through.
	// Default POST and PATCH (PUT and DELETE are idempotent by definition).
	Methods []string
	// ReplayHeaders are the response headers stored and replayed. Default
	// DefaultReplayHeaders(): Content-Type, Location, Content-Location, ETag,
	// Last-Modified.
	ReplayHeaders []string
	// MaxBodyBytes bounds the request body read for the fingerprint (413 beyond).
	// Default the Store's idempotency.Config.MaxRequestBytes.
	MaxBodyBytes int64
	// MaxResponseBytes bounds the handler's response body, which the middleware
	// buffers until the key is stored. A Write beyond it fails with an error
	// matching idempotency.ErrResponseTooLarge; the client then gets 500
	// (response-too-large) and nothing commits. Default the Store's
	// idempotency.Config.MaxResponseBytes (a larger body could not be stored).
	MaxResponseBytes int
	// Logger receives one record per request the middleware could not serve
	// because of the store (the database failed, the commit outcome is unknown, the
	// response was too large to store): the cause, which the client never sees.
	// Default the Store's idempotency.Config.Logger.
	Logger *slog.Logger
	// Store reports whether a response with this status is stored (and its
	// transaction committed). Default: status < 500 — a 5xx rolls the effect and
	// the key back, so a retry runs again.
	Store func(status int) bool
}

// DefaultReplayHeaders returns Config.ReplayHeaders's default, a new slice each
// time: the headers that describe a stored response (Content-Type, Location,
// Content-Location, ETag, Last-Modified).
func DefaultReplayHeaders() []string {
	return []string{"Content-Type", "Location", "Content-Location", "ETag", "Last-Modified"}
}

// storeBelow5xx is Config.Store's default.
func storeBelow5xx(status int) bool { return status < http.StatusInternalServerError }

func (c Config) withDefaults(store *idempotency.Store) Config {
	if len(c.Methods) == 0 {
		c.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	if c.ReplayHeaders == nil {
		c.ReplayHeaders = DefaultReplayHeaders()
	}
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, int64(store.Config().MaxRequestBytes))
	c.MaxResponseBytes = cmp.Or(c.MaxResponseBytes, store.Config().MaxResponseBytes)
	c.Logger = cmp.Or(c.Logger, store.Config().Logger)
	if c.Store == nil {
		c.Store = storeBelow5xx
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Scope == nil:
		return &ConfigError{Field: "Scope", Reason: "required"}
	case c.MaxBodyBytes < 0:
		return &ConfigError{Field: "MaxBodyBytes", Reason: "negative"}
	case c.MaxResponseBytes < 0:
		return &ConfigError{Field: "MaxResponseBytes", Reason: "negative"}
	}
	return nil
}
