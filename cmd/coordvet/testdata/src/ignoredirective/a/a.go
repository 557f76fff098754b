package a

//coordvet:ignore // want `ignoredirective: //coordvet:ignore names no check, so it silences nothing; write //coordvet:ignore <check> <reason> \(see docs/vet.md#ignoring-a-finding\)`
var x = 1

//coordvet:ignore dualwrite // want `//coordvet:ignore gives no reason`
var y = 2

//coordvet:ignore dualwrites typo in the name // want `names unknown check dualwrites`
var z = 3

//coordvet:ignore dualwrite best-effort cache invalidation
var ok = 4

//coordvet:ignored is another tool's directive and not ours
var other = 5
