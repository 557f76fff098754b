package a

//coordvet:ignore fencetoken // want `gives no reason`
var w = 6
