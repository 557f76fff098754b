package coordtest

import (
	"os"
	"testing"
)

// servicesHint is how to get every server the tests use.
const servicesHint = "start the local servers with scripts/services.sh (it installs and starts PostgreSQL, Redis and NATS)"

// unreachable fails the test: a test that needs a server never skips, in CI or
// out of it, so a green run always means the server-backed tests ran.
func unreachable(t testing.TB, what, url string, err error) {
	t.Helper()
	t.Fatalf("coordtest: %s at %s is unreachable: %v\n%s", what, url, err, servicesHint)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
