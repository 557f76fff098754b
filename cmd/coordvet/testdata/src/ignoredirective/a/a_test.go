package a

//coordvet:ignore fencetoken owner=payments expires=2026-09-30 // want `has no reason`
var w = 6
