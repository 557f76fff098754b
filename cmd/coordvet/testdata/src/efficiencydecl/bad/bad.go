package bad

import "github.com/coordkit/coordkit/efficiencylock"

var why = efficiencylock.DuplicatesHarmless("cache warm-up")

func locks(rdb any, reason string) {
	efficiencylock.New(rdb, why, efficiencylock.Config{})                                           // want `efficiencydecl: efficiencylock.New gets a Reason that is not declared at the call.*; fix: write DuplicatesHarmless.* \(RFC MUST 4\)`
	efficiencylock.New(rdb, efficiencylock.DuplicatesHarmless(reason), efficiencylock.Config{})     // want `gets a duplicates-harmless reason that is not a constant string`
	efficiencylock.New(rdb, efficiencylock.DuplicatesHarmless(""), efficiencylock.Config{})         // want `gets an empty duplicates-harmless reason`
	efficiencylock.New(rdb, efficiencylock.DuplicatesHarmless("   "), efficiencylock.Config{})      // want `gets an empty duplicates-harmless reason`
	efficiencylock.New(rdb, efficiencylock.Reason{}, efficiencylock.Config{})                       // want `gets a Reason that is not declared at the call`
	efficiencylock.New(rdb, efficiencylock.DuplicatesHarmless("a"+reason), efficiencylock.Config{}) // want `not a constant string`
}
