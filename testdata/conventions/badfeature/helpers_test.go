package badfeature

import (
	"log/slog"
	"os"
	"testing"
	"time"
)

// waitFor is the fourth copy of coordtest.Until.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testLogger is the fourth copy of coordtest.Logger.
func testLogger(t *testing.T) *slog.Logger {
	return slog.Default()
}

func servers() (string, error) {
	url := os.Getenv("COORD_TEST_POSTGRES_URL")
	if url == "" {
		return "", nil
	}
	_, err := coordtest.StartEtcd(os.TempDir())
	return url, err
}

func alerts() ([]byte, error) {
	return os.ReadFile("../deploy/prometheus/alerts.yaml")
}
