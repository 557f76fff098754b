package correctnesslease

import (
	"context"
	"testing"
	"time"

	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestAcquireRelease(t *testing.T) {
	e := coordtest.Etcd(t)
	cli := e.Client(t)
	ctx := context.Background()
	s := newSession(t, cli, Config{Tenant: testTenant(t), TTL: 3 * time.Second})
	l, err := Acquire(ctx, s, "job")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("token %s", l.Token())
	if _, err := TryAcquire(ctx, newSession(t, cli, Config{Tenant: testTenant(t), TTL: 3 * time.Second}), "job"); err == nil {
		t.Fatal("TryAcquire succeeded while held")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if context.Cause(l.Context()) == nil {
		t.Fatal("context alive after release")
	}
}
