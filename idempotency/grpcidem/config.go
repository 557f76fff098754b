package grpcidem

import (
	"cmp"
	"context"
	"log/slog"

	"github.com/coordkit/coordkit/idempotency"
)

// Config configures UnaryServerInterceptor. Scope is required; every other field
// states its default.
type Config struct {
	// Scope returns the tenant or principal of the call (from its auth context). An
	// error fails the call with Unauthenticated. Required.
	Scope func(ctx context.Context, fullMethod string) (string, error)
	// Methods are the full method names ("/pkg.Service/Method") the interceptor
	// protects; others pass through. Default: every unary method.
	Methods []string
	// Optional lets calls without a key through, unprotected. Default false:
	// InvalidArgument.
	Optional bool
	// Logger receives one record per call the interceptor answered Unavailable
	// because the store failed: the cause, which the client never sees (it names
	// database users, hosts and tables). Default the Store's
	// idempotency.Config.Logger.
	Logger *slog.Logger
}

func (c Config) withDefaults(store *idempotency.Store) Config {
	c.Logger = cmp.Or(c.Logger, store.Config().Logger)
	return c
}

func (c Config) validate() error {
	if c.Scope == nil {
		return &ConfigError{Field: "Scope", Reason: "required"}
	}
	return nil
}
