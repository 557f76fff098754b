package coordtest

import (
	"fmt"
	"os"
	"testing"
)

// A port FreePort hands out is never one the kernel gives an outgoing
// connection: a client redialing a killed server cannot take it (a TCP
// self-connect, source port = destination port, held the port of the etcd
// member TestReconnectHerd restarts: "address already in use").
func TestFreePortIsOutsideTheEphemeralRange(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skipf("no ephemeral range to check against: %v", err)
	}
	var first, last int
	if _, err := fmt.Sscan(string(b), &first, &last); err != nil {
		t.Fatalf("ip_local_port_range %q: %v", b, err)
	}
	for range 50 {
		if p := FreePort(t); p >= first && p <= last {
			t.Fatalf("FreePort = %d, inside the ephemeral range [%d, %d]", p, first, last)
		}
	}
}
