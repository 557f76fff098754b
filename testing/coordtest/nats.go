package coordtest

import (
	"net"
	"net/url"
	"testing"
	"time"
)

// DefaultNATSURL is used when COORD_TEST_NATS_URL is not set.
const DefaultNATSURL = "nats://127.0.0.1:4222"

// NATSURL returns the URL of a running NATS server with JetStream
// (COORD_TEST_NATS_URL, or the local server), after checking that it accepts TCP
// connections. It fails the test, with a hint, when it does not.
func NATSURL(t testing.TB) string {
	t.Helper()
	raw := envOr("COORD_TEST_NATS_URL", DefaultNATSURL)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("coordtest: NATS URL: %v", err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		unreachable(t, "NATS", redactURL(raw), err)
	}
	c.Close()
	return raw
}
