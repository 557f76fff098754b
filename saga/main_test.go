package saga

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		os.Exit(crashWorker())
	}
	goleak.VerifyTestMain(m)
}
