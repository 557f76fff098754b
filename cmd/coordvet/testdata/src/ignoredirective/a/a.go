package a

//coordvet:ignore // want `ignoredirective: //coordvet:ignore names no check: no exception, silences nothing; fix: use //coordvet:ignore <check> owner=<team> expires=<date> <reason> \(RFC Exceptions\)`
var x = 1

//coordvet:ignore dualwrite owner=payments expires=2026-09-30 // want `has no reason`
var y = 2

//coordvet:ignore dualwrites owner=payments expires=2026-09-30 typo in the name // want `names unknown check dualwrites.*fix: name dualwrite`
var z = 3

//coordvet:ignore dualwrite owner=payments expires=2026-09-30 best-effort cache invalidation
var ok = 4

//coordvet:ignored is another tool's directive and not ours
var other = 5

//coordvet:ignore dualwrite best-effort, but granted before the RFC asked for owners // want `has no owner=<team>, no expires=<YYYY-MM-DD>`
var legacy = 6

//coordvet:ignore dualwrite expires=2026-09-30 who owns this? // want `has no owner=<team>`
var noOwner = 7

//coordvet:ignore dualwrite owner=payments expires=2026-06-30 the migration was due in June // want `expired on 2026-06-30 \(today is 2026-07-01\)`
var expired = 8

//coordvet:ignore dualwrite owner=payments expires=2027-03-01 a year of grace // want `expires 2027-03-01, more than two quarters ahead \(latest 2027-01-01\)`
var tooFar = 9

//coordvet:ignore dualwrite owner=payments expires=next-quarter soon // want `has expires=next-quarter, not a YYYY-MM-DD date`
var notADate = 10

//coordvet:ignore pavedrod owner=payments expires=2026-09-30 typo // want `names unknown check pavedrod.*fix: name pavedroad`
var typo = 11
