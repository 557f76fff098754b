package fix

//coordvet:ignore dualwrites owner=payments expires=2026-09-30 typo in the name // want `names unknown check dualwrites`
var z = 3
