package failstatic_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	runChildIfAsked() // re-executed as a client process by the outage test
	goleak.VerifyTestMain(m)
}
