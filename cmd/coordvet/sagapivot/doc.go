// Package sagapivot defines an Analyzer that reports literal saga definitions
// whose steps are not ordered around exactly one pivot.
//
// # Analyzer sagapivot
//
// sagapivot: report a literal saga definition without exactly one pivot, or with a step before it that cannot be compensated
//
// An orchestrated saga runs compensatable steps first, then exactly one pivot
// (the point of no return), then steps that are only retried forward (RFC MUST
// 5). A failure before the pivot is undone by running the compensations in
// reverse; after the pivot the saga can only go forward. saga.New checks this at
// run time; this check finds it at vet time, for a literal definition: a call
// of saga.New whose steps are all direct calls of saga.Compensatable,
// saga.Pivot and saga.Retriable — as its arguments, or as the elements of a
// slice literal passed with ... (inline, or a local variable assigned that
// literal once and never changed: steps := []saga.Step[T]{…};
// saga.New("order", steps...)). It reports:
//
//   - no pivot;
//   - a second (or later) pivot;
//   - a Compensatable step with a nil compensation;
//   - a Compensatable step after the pivot (it would never be compensated);
//   - a Retriable step before the pivot (a failure after it could not be undone).
//
// A definition without any pivot gets the one finding that says so, not one per
// step.
//
// Definitions built from a slice that is appended to, assigned twice or shared
// (its address taken), from a parameter, or from helper functions are not
// literal and are left to saga.New's own validation. Package saga itself is
// exempt.
//
// Bad:
//
//	s, err := saga.New("order",
//		saga.Retriable("reserve-stock", reserve), // before the pivot: cannot be undone
//		saga.Pivot("charge-card", charge),
//		saga.Pivot("ship", ship),                 // a second pivot
//	)
//
// Good:
//
//	s, err := saga.New("order",
//		saga.Compensatable("reserve-stock", reserve, release),
//		saga.Pivot("charge-card", charge),
//		saga.Retriable("ship", ship),
//	)
package sagapivot
