// Package scripttest holds the tests of the repository's shell helpers
// (scripts/lib); it has no code of its own.
package scripttest
