package coordtest

import (
	"fmt"
	"net"
	"testing"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("coordtest: no free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func loopbackURL(port int) string { return fmt.Sprintf("http://127.0.0.1:%d", port) }
