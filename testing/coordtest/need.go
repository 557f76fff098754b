package coordtest

import (
	"os"
	"testing"
)

// servicesHint is how to get every server the tests use.
const servicesHint = `start the local servers with  eval "$(scripts/services.sh)"  (it installs and starts PostgreSQL, Redis and NATS with JetStream where none answers, and sets COORD_TEST_POSTGRES_URL, COORD_TEST_REDIS_URL and COORD_TEST_NATS_URL to where they are)`

// unreachable fails the test: a test that needs a server never skips, in CI or
// out of it, so a green run always means the server-backed tests ran.
func unreachable(t testing.TB, what, url string, err error) {
	t.Helper()
	t.Fatalf("coordtest: %s at %s is unreachable: %v\n%s", what, url, err, servicesHint)
}

// missingBinary fails the test for a server binary it would start, saying how to
// install it.
func missingBinary(t testing.TB, err error, install string) {
	t.Helper()
	t.Fatalf("coordtest: %v\ninstall it with %s", err, install)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
