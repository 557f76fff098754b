package fencetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// kit holds what every check shares: a direct etcd client and a session that mints
// tokens.
type kit struct {
	t       testing.TB
	cfg     Config
	cli     *clientv3.Client
	session *correctnesslease.Session
}

func newKit(t testing.TB, cfg Config) *kit {
	t.Helper()
	cli := coordtest.NewEtcdClient(t, cfg.Endpoints...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: cfg.Tenant})
	if err != nil {
		t.Fatalf("fencetest: session on %v: %v", cfg.Endpoints, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return &kit{t: t, cfg: cfg, cli: cli, session: s}
}

// uniqueName is a lease name (and key) no other check uses.
func (k *kit) uniqueName(t testing.TB) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	n := strings.NewReplacer("/", "-", " ", "-", "#", "-").Replace(t.Name())
	if len(n) > 60 {
		n = n[len(n)-60:]
	}
	return strings.Trim(n, "-") + "-" + hex.EncodeToString(b)
}

// tokens acquires and releases the lease name n times and returns the n tokens, in
// strictly increasing order (each grant's key has a newer create revision).
func (k *kit) tokens(ctx context.Context, name string, n int) ([]coord.Token, error) {
	out := make([]coord.Token, 0, n)
	for i := 0; i < n; i++ {
		l, err := correctnesslease.Acquire(ctx, k.session, name)
		if err != nil {
			return nil, fmt.Errorf("fencetest: acquire %q: %w", name, err)
		}
		tok := l.Token()
		if err := l.Release(ctx); err != nil {
			return nil, fmt.Errorf("fencetest: release %q: %w", name, err)
		}
		if len(out) > 0 {
			if c, ok := tok.Compare(out[len(out)-1]); !ok || c <= 0 {
				return nil, fmt.Errorf("fencetest: lease tokens not increasing: %s after %s", tok, out[len(out)-1])
			}
		}
		out = append(out, tok)
	}
	return out, nil
}
