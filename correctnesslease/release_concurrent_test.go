package correctnesslease

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestConcurrentReleaseReturnsFirstResult: Release promises that later calls
// return the first call's result. A second Release made while the first is still
// trying to delete the key (etcd unreachable) must not report success before the
// first has finished: it returns the first call's error.
func TestConcurrentReleaseReturnsFirstResult(t *testing.T) {
	e := coordtest.Etcd(t)
	proxy := coordtest.NewProxy(t, strings.TrimPrefix(e.Endpoints[0], "http://"))
	cli := coordtest.NewEtcdClient(t, proxy.URL())
	s := newSession(t, cli, Config{Tenant: coordtest.Tenant(t), TTL: testTTL})
	l, err := Acquire(context.Background(), s, "job")
	if err != nil {
		t.Fatal(err)
	}
	proxy.Blackhole()
	defer proxy.Heal()

	first := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		first <- l.Release(ctx)
	}()
	// Release gives up authority before its delete RPC: wait for that, so the
	// second call runs while the first is in flight.
	waitDone(t, l.Context().Done(), 5*time.Second, "first Release's loss of authority")
	if proxy.Stats().Blackholes == 0 {
		t.Fatal("the connection was never blackholed")
	}
	second := l.Release(context.Background())
	err1 := coordtest.Recv(t, first, 30*time.Second, "the first Release returning")
	if err1 == nil {
		t.Fatal("first Release succeeded through a blackholed connection")
	}
	if second == nil || second.Error() != err1.Error() {
		t.Fatalf("second Release returned %v while the first returned %v", second, err1)
	}
}
