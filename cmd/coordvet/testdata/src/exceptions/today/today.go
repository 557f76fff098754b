package today

// On 2026-06-01 this is valid; on vettest.Today (2026-07-01) it has expired.
//
//coordvet:ignore dualwrite owner=payments expires=2026-06-30 valid in June only
var a = 1

// Valid on 2026-07-01 but more than two quarters ahead of 2026-06-01.
//
//coordvet:ignore dualwrite owner=payments expires=2026-12-15 granted in July // want `more than two quarters ahead \(latest 2026-12-01\)`
var b = 2
