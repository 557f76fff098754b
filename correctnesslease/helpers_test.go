package correctnesslease

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// newSession opens a session that is closed when the test ends.
func newSession(t testing.TB, cli *clientv3.Client, cfg Config) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cfg.Logger == nil {
		cfg.Logger = coordtest.Logger(t)
	}
	s, err := NewSession(ctx, cli, cfg)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

func clientv3WithPrefix() clientv3.OpOption { return clientv3.WithPrefix() }

// lossReason returns the LossReason of a context's cause or error, or "".
func lossReason(err error) coord.LossReason {
	var ae *coord.AuthorityLostError
	if errors.As(err, &ae) {
		return ae.Reason
	}
	return ""
}

// waitKeys blocks until prefix holds n keys.
func waitKeys(t testing.TB, cli *clientv3.Client, prefix string, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("prefix %s has %d keys, want %d", prefix, resp.Count, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitDone waits for ch to close, failing the test after d.
func waitDone(t testing.TB, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not done after %v", what, d)
	}
}
