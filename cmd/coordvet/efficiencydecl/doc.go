// Package efficiencydecl defines an Analyzer that reports efficiency locks
// constructed without a declared reason why duplicates are harmless.
//
// # Analyzer efficiencydecl
//
// efficiencydecl: report an efficiency lock without a constant, non-empty duplicates-harmless reason
//
// A Redis lock can be held by two processes at once (failover loses writes,
// expiry runs on wall clocks), so it is allowed only where running the work
// twice does no harm, and the code must say so (RFC MUST 4). efficiencylock.New
// takes an efficiencylock.Reason, and the only honest way to make one is
// efficiencylock.DuplicatesHarmless("why") with the reason written down where
// the lock is built. The check reports every call of a function of package
// efficiencylock (New and its variants) whose Reason argument is not a direct
// call of DuplicatesHarmless with a constant, non-empty string: a variable, a
// computed string, an empty or blank string, a conversion. Test files are
// checked too; package efficiencylock itself is exempt.
//
// If the work must not run twice, no reason is true: use correctnesslease and
// fence the writes instead.
//
// Bad:
//
//	lock, err := efficiencylock.New(rdb, efficiencylock.DuplicatesHarmless(reason), nil)
//	lock, err := efficiencylock.New(rdb, efficiencylock.DuplicatesHarmless(""), nil)
//
// Good:
//
//	lock, err := efficiencylock.New(rdb,
//		efficiencylock.DuplicatesHarmless("cache warm-up: a second run rewrites the same keys"), nil)
package efficiencydecl
