package coordtest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
)

// DefaultNATSURL is used when COORD_TEST_NATS_URL is not set.
const DefaultNATSURL = "nats://127.0.0.1:4222"

// errNoJetStream reports a NATS server that answers with JetStream disabled.
var errNoJetStream = errors.New("JetStream is not enabled")

// NATSURL returns the URL of a running NATS server with JetStream
// (COORD_TEST_NATS_URL, or the local server), after checking with a JetStream API
// request that JetStream is enabled there. It fails the test, with a hint, when the
// server is unreachable or has JetStream off.
func NATSURL(t testing.TB) string {
	t.Helper()
	raw := envOr("COORD_TEST_NATS_URL", DefaultNATSURL)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("coordtest: NATS URL: %v", err)
	}
	if err := checkJetStream(u.Host, 5*time.Second); err != nil {
		if errors.Is(err, errNoJetStream) {
			t.Fatalf("coordtest: NATS at %s answers, but %v\n"+
				"run eval \"$(scripts/services.sh nats)\": it starts a NATS server with JetStream and sets COORD_TEST_NATS_URL",
				redactURL(raw), err)
		}
		unreachable(t, "NATS", redactURL(raw), err)
	}
	return raw
}

// checkJetStream sends $JS.API.INFO over the NATS text protocol and reads the
// reply: an account info response means JetStream is on; "no responders" or an
// error reply wraps errNoJetStream.
func checkJetStream(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the server's INFO: %w", err)
	}
	if !strings.HasPrefix(line, "INFO ") {
		return fmt.Errorf("not a NATS server (it said %.40q)", line)
	}
	// no_responders: a request no one serves is answered at once with status 503.
	const inbox = "_INBOX.coordtest.jetstream"
	if _, err := fmt.Fprintf(c, "CONNECT {\"verbose\":false,\"headers\":true,\"no_responders\":true}\r\n"+
		"SUB %s 1\r\nPUB $JS.API.INFO %s 0\r\n\r\n", inbox, inbox); err != nil {
		return err
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("waiting for the reply to $JS.API.INFO: %w", err)
		}
		switch {
		case strings.HasPrefix(line, "MSG "):
			payload, err := r.ReadString('\n')
			if err != nil {
				return fmt.Errorf("reading the reply to $JS.API.INFO: %w", err)
			}
			if strings.Contains(payload, `"error"`) || !strings.Contains(payload, "account_info_response") {
				return fmt.Errorf("%w: $JS.API.INFO answered %s", errNoJetStream, strings.TrimSpace(payload))
			}
			return nil
		case strings.HasPrefix(line, "HMSG "):
			return fmt.Errorf("%w: no responders for $JS.API.INFO", errNoJetStream)
		case strings.HasPrefix(line, "-ERR"):
			return fmt.Errorf("the server refused the connection: %s", strings.TrimSpace(line))
		case strings.HasPrefix(line, "PING"):
			fmt.Fprint(c, "PONG\r\n")
		}
	}
}
