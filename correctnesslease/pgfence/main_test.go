package pgfence_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// roleEnv selects a child-process role when the test binary re-executes itself.
const roleEnv = "PGFENCE_TEST_ROLE"

func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "holder" {
		os.Exit(holderMain())
	}
	goleak.VerifyTestMain(m)
}
