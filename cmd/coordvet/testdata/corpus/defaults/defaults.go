// Package defaults gives the zero value of a constructor's last parameter, so
// the fixtures compile whatever shape the SDK's options take while the SDK
// settles its house style (a *Options pointer, a Config value, …).
package defaults

// Of3 returns the zero value of f's third parameter:
// efficiencylock.New(rdb, why, defaults.Of3(efficiencylock.New)).
func Of3[A, B, C, R1, R2 any](f func(A, B, C) (R1, R2)) (zero C) { return zero }
