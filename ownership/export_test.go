package ownership

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// NewTestSession opens a correctnesslease session of tenant with ttl, closed
// when the test ends: the one copy for the tests of both packages (the
// internal ones call it here, ownership_test through this file).
func NewTestSession(t testing.TB, cli *clientv3.Client, tenant string, ttl time.Duration) *correctnesslease.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: tenant, TTL: ttl, Logger: coordtest.Logger(t)})
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
