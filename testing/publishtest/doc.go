// Package publishtest certifies an outbox.Publisher against a real broker: a
// conformance kit a team runs, in its own tests, on its OWN broker adapter (as
// testing/fencetest does for a fenced resource). coordkit runs it on
// outbox/kafka (franz-go against kfake) and outbox/natsjs (a real nats-server)
// in their default tests.
//
// [Run] publishes through the adapter and reads back what the broker holds
// through a [Broker] the team writes (a consumer of the topic), and checks the
// contract of outbox.Publisher:
//
//   - DeliversEveryMessageInKeyOrder: a batch of interleaved keys returns nil, and
//     every message is on the broker with its key, payload, event id and type
//     headers and its own headers, in order per key;
//   - KeepsKeyOrderAcrossCalls: successive batches of the same keys stay in order;
//   - FailedKeyStopsItsLaterMessages: when one message of a key cannot be
//     delivered (its topic does not exist), Publish returns one error per message,
//     the failed message's (the broker's error, not ErrSkipped) and every later
//     message's of that key are not nil, none of those later messages reaches the
//     broker, and the other keys' errors are nil, each on its own message;
//   - DoneContextSendsNothing: with ctx already done, Publish returns at once with
//     an error matching outbox.ErrSkipped for every message (not attempted: the
//     relay does not count it toward MaxAttempts);
//   - ConcurrentCallsKeepKeyOrder: several relays publishing at once (disjoint
//     keys, as relays claim them) lose nothing and keep each key's order.
//
// A message may reach the broker more than once (publication is at-least-once):
// the kit compares first deliveries. Each check uses keys of its own, so the
// checks may share one topic. The kit fails, never skips, when the broker is
// unreachable.
//
// publishtest is for tests only; library code never imports it.
package publishtest
