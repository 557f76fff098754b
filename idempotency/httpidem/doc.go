// Package httpidem is net/http middleware that makes POST and PATCH handlers
// idempotent with an idempotency.Store, speaking the IETF Idempotency-Key header
// draft: 400 when the key is missing or invalid, 422 when it is reused with a
// different request, 409 with Retry-After while a duplicate is in flight, and the
// stored status, selected headers and body replayed, marked "Idempotent-Replayed: true".
//
// The handler runs inside the transaction that stores the key
// (idempotency.TxFromContext), so its writes and the key commit together. It reads
// r.Body as usual: the middleware read the body to fingerprint it (at most
// Config.MaxBodyBytes) and hands the same bytes to the handler. Its response is
// buffered until the key is stored, at most Config.MaxResponseBytes of body; a
// larger response fails the handler's Write, answers 500 and commits nothing. When
// the store fails the client gets 503 with Retry-After and Config.Logger the cause.
package httpidem
