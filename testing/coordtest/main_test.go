package coordtest

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// This package's own tests make Results to test Report: they are no scenarios
	// and must never land in a reliability run's rows.
	os.Unsetenv("COORD_RELIABILITY_REPORT")
	goleak.VerifyTestMain(m)
}
