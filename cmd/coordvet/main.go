// Command coordvet checks Go code against the coordkit coordination standard
// (RFC-COORD-001): hand-rolled locks, unfenced leases, forged tokens, undeclared
// efficiency locks, dual writes and saga definitions without one pivot.
//
// Standalone:
//
//	coordvet ./...
//
// As a vet tool:
//
//	go vet -vettool=$(which coordvet) ./...
//
// Every check is documented in docs/vet.md; `coordvet help <check>` prints one.
package main

import (
	"golang.org/x/tools/go/analysis/multichecker"

	"github.com/coordkit/coordkit/cmd/coordvet/suite"
)

func main() { multichecker.Main(suite.Analyzers()...) }
