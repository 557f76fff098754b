// Package grpcidem is a gRPC unary server interceptor with the semantics of the
// idempotency package and its HTTP middleware: the key travels in the
// "idempotency-key" request metadata; a missing or invalid key is InvalidArgument;
// a key reused with a different request is FailedPrecondition (HTTP 422); a
// duplicate in flight is Aborted with a RetryInfo detail and a "retry-after" trailer
// (HTTP 409); a completed key replays the stored response message, marked with the
// "idempotent-replayed: true" header. The handler runs inside the transaction that
// stores the key (idempotency.TxFromContext).
package grpcidem
