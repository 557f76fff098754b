package coordtest

import (
	"fmt"
	"net"
	"testing"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	p := freePort()
	if p == 0 {
		t.Fatal("coordtest: no free port on 127.0.0.1")
	}
	return p
}

// freePort returns a port that was free a moment ago, or 0.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func loopbackURL(port int) string { return fmt.Sprintf("http://127.0.0.1:%d", port) }
