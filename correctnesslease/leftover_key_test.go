package correctnesslease

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestLeftoverKeyIsNeverReused: a key of this session that no Lease owns (written
// by someone else, or left over) is removed and queued again, so the token is a
// fresh create revision — never the leftover's — and it is the create revision
// of the key etcd holds (the queue position everyone else sees).
func TestLeftoverKeyIsNeverReused(t *testing.T) {
	e := coordtest.Etcd(t)
	cli := e.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := newSession(t, cli, Config{Tenant: coordtest.Tenant(t), TTL: 10 * time.Second})
	const name = "job"
	prefix, err := coord.Key(s.cfg.Tenant, coord.KindElections, name)
	if err != nil {
		t.Fatal(err)
	}
	leftover, err := cli.Put(ctx, s.keyFor(prefix), "", clientv3.WithLease(s.id))
	if err != nil {
		t.Fatal(err)
	}
	l, err := Acquire(ctx, s, name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	if got := l.Token().Revision(); got <= leftover.Header.Revision {
		t.Fatalf("token revision %d, leftover key written at %d: the leftover key was reused", got, leftover.Header.Revision)
	}
	// The token is the create revision of the key etcd holds for the lease.
	resp, err := cli.Get(ctx, l.Key())
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != l.Token().Revision() {
		t.Fatalf("key %s in etcd: %v (%v); want create revision %d, the token", l.Key(), resp.Kvs, err, l.Token().Revision())
	}
}
