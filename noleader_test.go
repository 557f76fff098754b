package coordkit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestNoLeaderIsReported: an etcd member cut off from its quorum (the two others
// paused) has no leader; every coordkit entry point that asks it says so with
// coord.ErrNoLeader, which coord.Retryable calls retryable — instead of a
// deadline, or an etcd error only rpctypes can recognise.
func TestNoLeaderIsReported(t *testing.T) {
	cluster := coordtest.EtcdCluster(t, 3, nil)
	lone := coordtest.NewEtcdClient(t, cluster.Members[0].ClientURL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A failstatic cache watching through member 0 while the cluster is healthy.
	cache, err := failstatic.New(ctx, lone, failstatic.Config[string]{
		Key:    "/tenants/noleader/config/flags",
		Decode: func(kvs []failstatic.KV) (string, error) { return "", nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	// A session made while the cluster was healthy: its TryAcquire, once the quorum
	// is gone, must say why it failed — no leader (it said only "context deadline
	// exceeded").
	held, err := correctnesslease.NewSession(ctx, lone, correctnesslease.Config{Tenant: "noleader", TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { // bounded: the revoke cannot commit while the quorum is gone
		cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer ccancel()
		_ = held.Close(cctx)
	}()

	for _, m := range cluster.Members[1:] {
		if err := m.Pause(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Resume() })
	}
	// The fault happened: the lone member reports no leader (observed, not assumed).
	for {
		sctx, scancel := context.WithTimeout(ctx, time.Second)
		st, err := lone.Status(sctx, cluster.Members[0].ClientURL)
		scancel()
		if err == nil && st.Leader == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("member 0 still reports a leader after its peers were paused (last status err %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, coord.ErrNoLeader) || !coord.Retryable(err) {
			t.Errorf("%s against a leaderless member = %v; want coord.ErrNoLeader, retryable", what, err)
		}
	}
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	_, err = correctnesslease.NewSession(rctx, lone, correctnesslease.Config{Tenant: "noleader", TTL: 3 * time.Second})
	check("correctnesslease.NewSession", err)
	_, err = correctnesslease.Observe(rctx, lone, "noleader", "job")
	check("correctnesslease.Observe", err)
	tctx, tcancel := context.WithTimeout(ctx, 3*time.Second)
	defer tcancel()
	_, err = correctnesslease.TryAcquire(tctx, held, "job")
	// etcd's client retries the refused write until ctx ends, so the call ends with
	// ctx (its error says cancelled, not retryable) — but it names the cause.
	if !errors.Is(err, coord.ErrNoLeader) {
		t.Errorf("correctnesslease.TryAcquire against a leaderless member = %v; want it to match coord.ErrNoLeader", err)
	}
	// failstatic: the watch stream (require-leader) is ended by the member; the
	// cache keeps serving and says why in Status().LastError (the client's
	// watch plane logs it too, to its own logger).
	for {
		if err := cache.Status().LastError; errors.Is(err, coord.ErrNoLeader) {
			check("failstatic watch", err)
			return
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("failstatic never reported coord.ErrNoLeader (status %+v)", cache.Status())
		}
	}
}
