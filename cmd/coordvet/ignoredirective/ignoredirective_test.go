package ignoredirective_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/coordkit/coordkit/cmd/coordvet/dualwrite"
	"github.com/coordkit/coordkit/cmd/coordvet/ignoredirective"
	"github.com/coordkit/coordkit/cmd/coordvet/internal/vettest"
)

// TestTypoFix: the nearest check name is the suggested fix.
func TestTypoFix(t *testing.T) {
	analysistest.RunWithSuggestedFixes(t, vettest.TestData(t), ignoredirective.Analyzer, "ignoredirective/fix")
}

// TestInvalidExceptionsSilenceNothing: an expired or ownerless exception lets
// the finding through (and ignoredirective reports the directive itself).
func TestInvalidExceptionsSilenceNothing(t *testing.T) {
	analysistest.Run(t, vettest.TestData(t), dualwrite.Analyzer, "exceptions/invalid")
}

// TestUnusedExceptionFix: an exception that silences nothing is reported by
// its check, with a fix that deletes its line.
func TestUnusedExceptionFix(t *testing.T) {
	analysistest.RunWithSuggestedFixes(t, vettest.TestData(t), dualwrite.Analyzer, "exceptions/unused")
}

// TestTodayFromEnvironment: the same directive is valid or expired by the
// date in COORDVET_TODAY alone.
func TestTodayFromEnvironment(t *testing.T) {
	dir := vettest.TestData(t)
	t.Setenv("COORDVET_TODAY", "2026-06-01")
	analysistest.Run(t, dir, ignoredirective.Analyzer, "exceptions/today")
}
