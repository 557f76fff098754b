package coordtest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, chosen
// outside the kernel's ephemeral range: a server killed and restarted on it
// (EtcdMember.Start, PostgresServer.RestartCrash) finds it free again. In the
// ephemeral range a client redialing the dead server could be given the very
// port as its own source port (TCP self-connect: connected to itself) or any
// outgoing connection could take it, and the restart failed with "address
// already in use".
func FreePort(t testing.TB) int {
	t.Helper()
	p := freePort()
	if p == 0 {
		t.Fatal("coordtest: no free port on 127.0.0.1 outside the ephemeral range")
	}
	return p
}

// handedOut holds the ports freePort returned in this process: a port is given
// once, so two members of one cluster, or a parallel test picking while a member
// is down, never get the same one.
var handedOut sync.Map

// freePort returns a port outside the ephemeral range that was free a moment
// ago and not handed out before in this process, or 0. It tries this process's
// own slice of the range first (by PID), so test binaries running side by side
// (go test -p) seldom pick from the same ports while a server is starting.
func freePort() int {
	lo, hi := nonEphemeral()
	const slices = 32
	size := (hi - lo) / slices
	own := lo + os.Getpid()%slices*size
	for i := range 400 {
		p := own + rand.IntN(size)
		if i >= 200 { // the whole range
			p = lo + rand.IntN(hi-lo)
		}
		if _, taken := handedOut.LoadOrStore(p, true); taken {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			handedOut.Delete(p)
			continue
		}
		l.Close()
		return p
	}
	return 0
}

// nonEphemeral returns the ports [lo, hi) tests pick from: below the kernel's
// ephemeral range (net.ipv4.ip_local_port_range, Linux's default 32768–60999),
// or above it when it starts too low to leave room.
func nonEphemeral() (lo, hi int) {
	first, last := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var a, z int
		if n, _ := fmt.Sscan(string(b), &a, &z); n == 2 && a > 0 && a <= z {
			first, last = a, z
		}
	}
	if first-10000 >= 5000 {
		return 10000, first
	}
	return last + 1, 65536
}

func loopbackURL(port int) string { return fmt.Sprintf("http://127.0.0.1:%d", port) }
