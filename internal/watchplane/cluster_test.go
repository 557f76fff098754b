package watchplane

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestAnotherClusterIsNoConfirmation: when another etcd cluster answers at the
// client's address (a restored or rebuilt cluster, another process's etcd on the
// freed port), the plane does not confirm its mirror of the first cluster with it
// — the new cluster's revision is below the mirror's, which the probe took for
// "current" (the demo's restarted cache served the stopped etcd's keys as live,
// in a CI run at 1e75439) — and Err says why. The second cluster's answer is
// what proves the fault happened: it is seen by a client of its own.
func TestAnotherClusterIsNoConfirmation(t *testing.T) {
	port := coordtest.FreePort(t)
	opts := &coordtest.EtcdClusterOpts{ClientPorts: []int{port}}
	first := coordtest.EtcdCluster(t, 1, opts)
	cli := first.Client(t)
	tp := tenantPrefix(t)
	for i := range 5 { // the mirror's revision above a fresh cluster's
		put(t, cli, tp+"config/k", strconv.Itoa(i))
	}
	p := New(cli, Config{})
	defer p.Close()
	s, _ := p.Subscribe(Spec{Key: tp + "config/", Prefix: true, ProbeInterval: 50 * time.Millisecond})
	next(t, s, "the first resync")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Sync(ctx); err != nil {
		t.Fatalf("never confirmed by the first cluster: %v", err)
	}

	first.Members[0].Kill()
	second := coordtest.EtcdCluster(t, 1, opts)
	resp, err := second.Client(t).Get(ctx, "x")
	if err != nil {
		t.Fatalf("the second cluster does not answer at the same address: %v", err)
	}
	t.Logf("the second cluster answers at %s at revision %d", second.Endpoints()[0], resp.Header.Revision)

	sctx, scancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer scancel()
	if err := s.Sync(sctx); err == nil {
		t.Fatalf("the mirror of the first cluster was confirmed current by another cluster (its revision %d)", resp.Header.Revision)
	}
	if err := s.Err(); !errors.Is(err, ErrOtherCluster) {
		t.Fatalf("Err = %v, want ErrOtherCluster", err)
	}
}
