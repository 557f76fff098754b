// Package saga runs orchestrated sagas on the team's own Postgres, with a pivot the
// runtime enforces (RFC-COORD-001 MUST 5).
//
// A saga is a [Definition] built by [New] from steps of three kinds, in this order:
// [Compensatable] steps (an action and the compensation that undoes it), exactly
// one [Pivot] (the point of no return), then [Retriable] steps (only ever retried
// forward). New rejects anything else with a typed error: no pivot, two pivots, a
// compensatable step without a compensation, a compensatable step after the pivot.
//
// The saga's data is a Go type T, stored as JSON and committed after every step
// together with the step's output ([StepContext.SetOutput]), which later steps
// read ([StepContext.Output]). [Start] or [StartTx] (in the caller's transaction)
// inserts the saga and notifies runners; [Client.Run], in any number of processes,
// claims due sagas with FOR UPDATE SKIP LOCKED and an owner token with expiry, and
// drives them. Every state write is fenced by the claim's version
// (UPDATE … WHERE id = $1 AND claim_version = $2), so a runner that lost its claim
// (paused past expiry) cannot write.
//
// Semantics:
//
//   - Every call carries the idempotency key "<saga id>/<step name>"
//     ([StepContext.IdempotencyKey]); participants deduplicate with it, ideally
//     through a [Barrier] in their own Postgres transaction, which also makes
//     compensations of steps that never ran, and actions arriving after their
//     compensation, harmless.
//   - A business failure ([Fail], [ErrBusiness]) before or at the pivot compensates
//     the completed steps newest first. Any other error is technical: retried
//     with capped full-jitter backoff (Config.Backoff).
//   - Once the pivot commits, nothing is compensated: failures, business or not,
//     are retried forward, and a saga still retrying Config.StuckAfter (1 h) after
//     its pivot pages. The table's CHECK constraint refuses compensation past the
//     pivot too.
//   - A compensation failing Config.CompensationAttempts (3) times pages
//     (Config.OnPage, metric coordkit.saga.compensation_failures) and parks the saga in
//     needs_human instead of retrying silently forever.
//
// Admin: [Client.List] by type, state and age, [Client.RetryNow],
// [Client.Resolve] (needs_human), [Client.Cancel] (compensates, before the pivot
// only). Metrics: coordkit.saga.state.age (oldest non-terminal saga per type and
// state), coordkit.saga.compensation_failures, coordkit.saga.steps, coordkit.saga.retries.
//
// See docs/saga.md for step-ordering rules and an order-placement example.
package saga
