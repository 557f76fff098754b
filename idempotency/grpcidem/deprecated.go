package grpcidem

// Options is the former name of Config, kept so that programs written before the
// rename still compile: UnaryServerInterceptor(store, grpcidem.Options{…}) is
// UnaryServerInterceptor(store, grpcidem.Config{…}).
//
// Deprecated: use Config; Options goes in v0.2.0.
type Options = Config
