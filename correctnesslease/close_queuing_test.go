package correctnesslease

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestCloseDoesNotWaitForAQueuingAcquire: Close makes every lease on the session
// lose its authority and waits for the session's goroutines. An Acquire whose
// queue transaction hangs (etcd unreachable) under a context without deadline
// must be aborted by that loss, not keep Close waiting forever.
func TestCloseDoesNotWaitForAQueuingAcquire(t *testing.T) {
	e := coordtest.Etcd(t)
	proxy := coordtest.NewProxy(t, strings.TrimPrefix(e.Endpoints[0], "http://"))
	cli := coordtest.NewEtcdClient(t, proxy.URL())
	s := newSession(t, cli, Config{Tenant: coordtest.Tenant(t), TTL: testTTL})
	proxy.Blackhole()
	defer proxy.Heal()

	acquired := make(chan error, 1)
	go func() {
		_, err := Acquire(context.Background(), s, "job")
		acquired <- err
	}()
	// Let the queue transaction reach the blackholed connection.
	time.Sleep(200 * time.Millisecond)
	if proxy.Stats().Blackholes == 0 {
		t.Fatal("the connection was never blackholed")
	}
	closed := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_ = s.Close(ctx)
		close(closed)
	}()
	// Close may spend its ctx on the revoke and Acquire its bounded cleanup
	// (TTL/3); neither may hang.
	waitDone(t, closed, testTTL, "Close with an Acquire queuing on a dead connection")
	select {
	case err := <-acquired:
		if err == nil {
			t.Fatal("Acquire succeeded on a closed session")
		}
	case <-time.After(testTTL):
		t.Fatal("Acquire still blocked after Close")
	}
}
