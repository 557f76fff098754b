package httpidem_test

import "github.com/coordkit/coordkit/idempotency/httpidem"

// A program written before Options became Config still compiles.
var _ = httpidem.Middleware
var _ httpidem.Config = httpidem.Options{Optional: true}
