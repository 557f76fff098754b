package bad

import "github.com/coordkit/coordkit/efficiencylock"

var why = efficiencylock.DuplicatesHarmless("cache warm-up")

func locks(rdb any, reason string) {
	efficiencylock.New(rdb, why, nil)                                           // want `efficiencydecl: efficiencylock.New gets a Reason that is not declared at the call.*; fix: write DuplicatesHarmless.* \(RFC MUST 4\)`
	efficiencylock.New(rdb, efficiencylock.DuplicatesHarmless(reason), nil)     // want `gets a duplicates-harmless reason that is not a constant string`
	efficiencylock.New(rdb, efficiencylock.DuplicatesHarmless(""), nil)         // want `gets an empty duplicates-harmless reason`
	efficiencylock.New(rdb, efficiencylock.DuplicatesHarmless("   "), nil)      // want `gets an empty duplicates-harmless reason`
	efficiencylock.New(rdb, efficiencylock.Reason{}, nil)                       // want `gets a Reason that is not declared at the call`
	efficiencylock.New(rdb, efficiencylock.DuplicatesHarmless("a"+reason), nil) // want `not a constant string`
}
