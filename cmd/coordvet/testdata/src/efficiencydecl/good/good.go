package good

import "github.com/coordkit/coordkit/efficiencylock"

const warmup = "cache warm-up: a second run rewrites the same keys"

func locks(rdb any) {
	efficiencylock.New(rdb, efficiencylock.DuplicatesHarmless("report rebuild is idempotent"), efficiencylock.Config{})
	efficiencylock.New(rdb, efficiencylock.DuplicatesHarmless(warmup), efficiencylock.Config{})
	efficiencylock.New(rdb, (efficiencylock.DuplicatesHarmless("parenthesised")), efficiencylock.Config{})
	//coordvet:ignore efficiencydecl owner=platform expires=2026-09-30 reason is loaded from the job catalogue, reviewed there
	efficiencylock.New(rdb, catalogue(), efficiencylock.Config{})
}

func catalogue() efficiencylock.Reason { return efficiencylock.DuplicatesHarmless("x") }
