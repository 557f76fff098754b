// Package httpidem is a stub of the coordkit idempotency HTTP middleware.
package httpidem

import (
	"net/http"

	"github.com/coordkit/coordkit/idempotency"
)

type Options struct{}

func Middleware(store *idempotency.Store, o Options) (func(http.Handler) http.Handler, error) {
	return func(h http.Handler) http.Handler { return h }, nil
}
