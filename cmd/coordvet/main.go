// Command coordvet checks Go code against the coordkit coordination standard
// (RFC-COORD-001): hand-rolled locks, unfenced leases, forged tokens, undeclared
// efficiency locks, dual writes and saga definitions without one pivot.
//
// Standalone (go/packages, tests included):
//
//	coordvet ./...                 # text; exit 3 on findings
//	coordvet -json ./...           # JSON; exit 3 on findings
//	coordvet -sarif ./... > x.sarif
//	coordvet -inventory ./...      # the RFC's success metrics, JSON and Markdown
//
// As a vet tool:
//
//	go vet -vettool=$(which coordvet) ./...
//
// -today=YYYY-MM-DD (or COORDVET_TODAY) sets the date exceptions expire against.
// Every check is documented in docs/vet.md; `coordvet help <check>` prints one.
package main

import (
	"flag"
	"os"

	"golang.org/x/tools/go/analysis/unitchecker"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/driver"
	"github.com/coordkit/coordkit/cmd/coordvet/suite"
)

func main() {
	analyzers := suite.Analyzers()
	driver.AddGlobalFlags(flag.CommandLine)
	if driver.VetProtocol(os.Args[1:]) {
		unitchecker.Main(analyzers...) // go vet -vettool: one package per call
	}
	os.Exit(driver.Main(analyzers, os.Args[1:]))
}
