// Package httpidem is net/http middleware that makes POST and PATCH handlers
// idempotent with an idempotency.Store, speaking the IETF Idempotency-Key header
// draft: 400 when the key is missing or invalid, 422 when it is reused with a
// different request, 409 with Retry-After while a duplicate is in flight, and the
// stored status, selected headers and body replayed, marked "Idempotent-Replayed: true".
//
// The handler runs inside the transaction that stores the key
// (idempotency.TxFromContext), so its writes and the key commit together.
package httpidem
