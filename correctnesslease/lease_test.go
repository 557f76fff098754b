package correctnesslease

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

const testTTL = 3 * time.Second

func TestAcquireReleaseToken(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx := context.Background()
	tenant := coordtest.Tenant(t)
	s := newSession(t, cli, Config{Tenant: tenant, TTL: testTTL})

	// The session owns a key under members/, bound to its lease.
	resp, err := cli.Get(ctx, "/tenants/"+tenant+"/members/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != s.LeaseID() {
		t.Fatalf("session key: %v", resp.Kvs)
	}

	l := mustAcquire(ctx, t, s, "job")
	tok := l.Token()
	kv, err := cli.Get(ctx, l.Key())
	if err != nil || len(kv.Kvs) != 1 {
		t.Fatalf("holder key: %v %v", kv, err)
	}
	if tok.Lease() != "/tenants/"+tenant+"/elections/job" || tok.Revision() != kv.Kvs[0].CreateRevision {
		t.Fatalf("token %s, key create revision %d", tok, kv.Kvs[0].CreateRevision)
	}
	if p, err := coord.ParseToken(tok.String()); err != nil || p != tok {
		t.Fatalf("token round trip: %v %v", p, err)
	}
	if _, err := Acquire(ctx, s, "job"); !errors.Is(err, ErrAlreadyQueued) {
		t.Fatalf("second Acquire on the same session: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := lossReason(context.Cause(l.Context())); got != coord.LossReleased {
		t.Fatalf("cause after Release: %v", context.Cause(l.Context()))
	}
	waitKeys(t, cli, tok.Lease()+"/", 0)

	// A new term has a strictly newer token.
	l2 := mustAcquire(ctx, t, s, "job")
	if c, ok := l2.Token().Compare(tok); !ok || c != 1 {
		t.Fatalf("new token %s not newer than %s", l2.Token(), tok)
	}
}

func TestTryAcquireHeld(t *testing.T) {
	cli, a, b := twoSessions(t)
	ctx := context.Background()
	l, err := TryAcquire(ctx, a, "job")
	if err != nil {
		t.Fatal(err)
	}
	_, err = TryAcquire(ctx, b, "job")
	if !errors.Is(err, ErrHeld) {
		t.Fatalf("TryAcquire while held: %v", err)
	}
	waitKeys(t, cli, l.Token().Lease()+"/", 1) // b's key was removed
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := TryAcquire(ctx, b, "job")
	if err != nil {
		t.Fatalf("TryAcquire after release: %v", err)
	}
	_ = l2.Release(ctx)
}

// TestFIFO queues waiters one after the other and checks they are granted in
// queue order, each woken exactly once (it watches only its predecessor).
func TestFIFOAndNoHerd(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx := context.Background()
	cfg := Config{Tenant: coordtest.Tenant(t), TTL: testTTL}
	const n = 6
	sessions := make([]*Session, n)
	for i := range sessions {
		sessions[i] = newSession(t, cli, cfg)
	}
	holder, err := Acquire(ctx, sessions[0], "job")
	if err != nil {
		t.Fatal(err)
	}
	prefix := holder.Token().Lease() + "/"
	type grant struct {
		i   int
		l   *Lease
		err error
	}
	granted := make(chan grant, n)
	for i := 1; i < n; i++ {
		go func() {
			l, err := Acquire(ctx, sessions[i], "job")
			granted <- grant{i, l, err}
		}()
		waitKeys(t, cli, prefix, int64(i+1)) // queued before the next one starts
	}
	// Every waiter is parked; nobody has been woken yet.
	for i := 1; i < n; i++ {
		if w := sessions[i].wakeups.Load(); w != 0 {
			t.Fatalf("waiter %d woken %d times before any release", i, w)
		}
	}
	// A waiter in the middle leaves: only its successor wakes (and goes back to
	// waiting on the holder).
	if _, err := cli.Delete(ctx, sessions[2].keyFor(holder.Token().Lease())); err != nil {
		t.Fatal(err)
	}
	g := coordtest.Recv(t, granted, 30*time.Second, "the waiter whose key was deleted returning")
	if g.i != 2 || !errors.Is(g.err, coord.ErrAuthorityLost) || lossReason(g.err) != coord.LossKeyDeleted {
		t.Fatalf("waiter whose key was deleted: %d %v", g.i, g.err)
	}
	waitKeys(t, cli, prefix, n-1)
	deadline := time.Now().Add(10 * time.Second)
	for sessions[3].wakeups.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for i := 1; i < n; i++ {
		want := int64(0)
		if i == 3 {
			want = 1
		}
		if w := sessions[i].wakeups.Load(); w != want {
			t.Fatalf("after a middle waiter left, waiter %d woken %d times, want %d", i, w, want)
		}
	}

	order := []int{}
	prev := holder.Token()
	cur := holder
	for range n - 2 {
		if err := cur.Release(ctx); err != nil {
			t.Fatal(err)
		}
		g := coordtest.Recv(t, granted, 30*time.Second, "the next waiter acquiring after a release")
		if g.err != nil {
			t.Fatalf("waiter %d: %v", g.i, g.err)
		}
		if c, _ := g.l.Token().Compare(prev); c != 1 {
			t.Fatalf("token %s not newer than %s", g.l.Token(), prev)
		}
		order = append(order, g.i)
		prev, cur = g.l.Token(), g.l
	}
	_ = cur.Release(ctx)
	if fmt.Sprint(order) != "[1 3 4 5]" {
		t.Fatalf("grant order %v, want [1 3 4 5]", order)
	}
	// Each release woke exactly one waiter: no herd.
	var total int64
	for i := 1; i < n; i++ {
		total += sessions[i].wakeups.Load()
	}
	if total != int64(len(order))+1 {
		t.Fatalf("total wakeups %d for %d handoffs and one departure, want one each", total, len(order))
	}
}

// TestKeyDeletedWhileWaiting: the waiter's own key vanishes (etcd#19597):
// Acquire returns an error, never a lease without a key.
func TestKeyDeletedWhileWaiting(t *testing.T) {
	cli, a, b := twoSessions(t)
	ctx := context.Background()
	holder := mustAcquire(ctx, t, a, "job")
	prefix := holder.Token().Lease()
	for _, fault := range []string{"delete", "overwrite"} {
		errc := acquireInBackground(ctx, b, "job", nil)
		waitKeys(t, cli, prefix+"/", 2)
		key := b.keyFor(prefix)
		var err error
		if fault == "delete" {
			_, err = cli.Delete(ctx, key)
		} else {
			_, err = cli.Put(ctx, key, "intruder")
		}
		if err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errc:
			if lossReason(err) != coord.LossKeyDeleted || !errors.Is(err, coord.ErrAuthorityLost) {
				t.Fatalf("%s: Acquire returned %v", fault, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Acquire still waiting after its key was touched", fault)
		}
		waitKeys(t, cli, prefix+"/", 1) // the overwritten key was removed too
	}
	if holder.Err() != nil {
		t.Fatalf("holder lost authority: %v", holder.Err())
	}
}

func TestCancelWhileWaitingRemovesKey(t *testing.T) {
	cli, a, b := twoSessions(t)
	ctx := context.Background()
	holder := mustAcquire(ctx, t, a, "job")
	prefix := holder.Token().Lease() + "/"
	wctx, cancel := context.WithCancelCause(ctx)
	errc := acquireInBackground(wctx, b, "job", nil)
	waitKeys(t, cli, prefix, 2)
	stop := errors.New("operator stop")
	cancel(stop)
	err := coordtest.Recv(t, errc, 30*time.Second, "the cancelled Acquire returning")
	if !errors.Is(err, stop) || lossReason(err) != coord.LossCancelled {
		t.Fatalf("cancelled Acquire: %v", err)
	}
	waitKeys(t, cli, prefix, 1)
	// A deadline works the same way.
	dctx, dcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer dcancel()
	if _, err := Acquire(dctx, b, "job"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past deadline: %v", err)
	}
	waitKeys(t, cli, prefix, 1)
}

// TestReleaseNeverDeletesNewerKey: a late, retried Release of an old term must
// not delete the key of a newer term that reuses the same key (etcd#22082).
func TestReleaseNeverDeletesNewerKey(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx := context.Background()
	s := newSession(t, cli, Config{Tenant: coordtest.Tenant(t), TTL: testTTL})
	old := mustAcquire(ctx, t, s, "job")
	if _, err := cli.Delete(ctx, old.Key()); err != nil { // the old term ends behind its back
		t.Fatal(err)
	}
	coordtest.Recv(t, old.Context().Done(), 10*time.Second, "old lease context")
	cur := mustAcquire(ctx, t, s, "job")
	if cur.Key() != old.Key() {
		t.Fatalf("keys differ: %s %s", cur.Key(), old.Key())
	}
	for range 3 { // idempotent and harmless, however often it is retried
		if err := old.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	kv, err := cli.Get(ctx, cur.Key())
	if err != nil || len(kv.Kvs) != 1 || kv.Kvs[0].CreateRevision != cur.Token().Revision() {
		t.Fatalf("newer key deleted by old Release: %v %v", kv, err)
	}
	if cur.Err() != nil {
		t.Fatalf("current lease lost: %v", cur.Err())
	}
	if err := cur.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cur.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestContextCause checks Lease.Context's cause for every LossReason.
func TestContextCause(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx := context.Background()
	tenant := coordtest.Tenant(t)
	check := func(t *testing.T, l *Lease, want coord.LossReason) {
		t.Helper()
		coordtest.Recv(t, l.Context().Done(), 10*time.Second, string(want))
		cause := context.Cause(l.Context())
		var ae *coord.AuthorityLostError
		if !errors.As(cause, &ae) || ae.Reason != want || ae.Lease != l.Token().Lease() {
			t.Fatalf("cause %v, want reason %s on %s", cause, want, l.Token().Lease())
		}
		if !errors.Is(l.Err(), coord.ErrAuthorityLost) {
			t.Fatalf("Err %v", l.Err())
		}
	}
	t.Run("released", func(t *testing.T) {
		s := newSession(t, cli, Config{Tenant: tenant, TTL: testTTL})
		l := mustAcquire(ctx, t, s, "released")
		_ = l.Release(ctx)
		check(t, l, coord.LossReleased)
	})
	t.Run("session closed", func(t *testing.T) {
		s := newSession(t, cli, Config{Tenant: tenant, TTL: testTTL})
		l := mustAcquire(ctx, t, s, "closed")
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		check(t, l, coord.LossReleased)
		waitKeys(t, cli, l.Token().Lease()+"/", 0) // revoked
		if lossReason(s.Err()) != coord.LossReleased {
			t.Fatalf("session Err %v", s.Err())
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		s := newSession(t, cli, Config{Tenant: tenant, TTL: testTTL})
		cctx, cancel := context.WithCancel(ctx)
		l := mustAcquire(cctx, t, s, "cancelled")
		cancel()
		check(t, l, coord.LossCancelled)
		if !errors.Is(context.Cause(l.Context()), context.Canceled) {
			t.Fatal("cause does not wrap context.Canceled")
		}
	})
	t.Run("key deleted", func(t *testing.T) {
		s := newSession(t, cli, Config{Tenant: tenant, TTL: testTTL})
		l := mustAcquire(ctx, t, s, "deleted")
		if _, err := cli.Delete(ctx, l.Key()); err != nil {
			t.Fatal(err)
		}
		check(t, l, coord.LossKeyDeleted)
		if s.Err() != nil {
			t.Fatalf("session lost with one key: %v", s.Err())
		}
	})
	t.Run("key overwritten", func(t *testing.T) {
		s := newSession(t, cli, Config{Tenant: tenant, TTL: testTTL})
		l := mustAcquire(ctx, t, s, "overwritten")
		if _, err := cli.Put(ctx, l.Key(), "intruder"); err != nil {
			t.Fatal(err)
		}
		check(t, l, coord.LossKeyDeleted)
	})
	t.Run("session expired", func(t *testing.T) {
		s := newSession(t, cli, Config{Tenant: tenant, TTL: testTTL})
		l := mustAcquire(ctx, t, s, "expired")
		if _, err := cli.Revoke(ctx, s.LeaseID()); err != nil {
			t.Fatal(err)
		}
		// The key watch sees the deletion before the next keepalive sees
		// "lease not found": the key went with the session's lease, so the
		// reason is the session's expiry, not "deleted by someone else".
		coordtest.Recv(t, s.Done(), testTTL, "session after revoke")
		if lossReason(s.Err()) != coord.LossSessionExpired {
			t.Fatalf("session Err %v", s.Err())
		}
		coordtest.Recv(t, l.Context().Done(), time.Second, "lease after revoke")
		if r := lossReason(context.Cause(l.Context())); r != coord.LossSessionExpired {
			t.Fatalf("lease cause %v, want %s", context.Cause(l.Context()), coord.LossSessionExpired)
		}
	})
	t.Run("renewal deadline", func(t *testing.T) {
		failing := func(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
			return nil, errors.New("injected: unreachable")
		}
		start := time.Now()
		s := newSession(t, cli, Config{Tenant: tenant, TTL: testTTL, keepAliveOnce: failing})
		l := mustAcquire(ctx, t, s, "deadline")
		check(t, l, coord.LossRenewalDeadline)
		if d := time.Since(start); d > testTTL {
			t.Fatalf("step-down after %v, want < TTL", d)
		}
		if lossReason(s.Err()) != coord.LossRenewalDeadline {
			t.Fatalf("session Err %v", s.Err())
		}
		// A new Acquire on the lost session fails at once.
		if _, err := Acquire(ctx, s, "deadline2"); !errors.Is(err, coord.ErrAuthorityLost) {
			t.Fatalf("Acquire on lost session: %v", err)
		}
	})
}

// TestSessionLostWhileWaiting: the waiter's session expires (revoked here);
// Acquire returns an error, never a lease.
func TestSessionLostWhileWaiting(t *testing.T) {
	cli, a, b := twoSessions(t)
	ctx := context.Background()
	holder := mustAcquire(ctx, t, a, "job")
	errc := make(chan error, 1)
	go func() {
		l, err := Acquire(ctx, b, "job")
		if l != nil {
			t.Error("got a lease from an expired session")
		}
		errc <- err
	}()
	waitKeys(t, cli, holder.Token().Lease()+"/", 2)
	if _, err := cli.Revoke(ctx, b.LeaseID()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if r := lossReason(err); r != coord.LossSessionExpired {
			t.Fatalf("Acquire returned %v, want reason %s", err, coord.LossSessionExpired)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire still waiting on an expired session")
	}
	coordtest.Recv(t, b.Done(), testTTL, "waiter's session")
	if holder.Err() != nil {
		t.Fatalf("holder lost: %v", holder.Err())
	}
}
