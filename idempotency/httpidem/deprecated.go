package httpidem

// Options is the former name of Config, kept so that programs written before the
// rename still compile: Middleware(store, httpidem.Options{…}) is
// Middleware(store, httpidem.Config{…}).
//
// Deprecated: use Config; Options goes in v0.2.0.
type Options = Config
