package membership_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestRepeatedLossesSlowTheRePuts: the instance's key is deleted every time it
// is put (another process fighting over the instance name, an operator's
// loop). Each loss within a TTL of the last put must wait a longer backoff
// before the next put (the attempt count restarts only after the key stayed a
// TTL): with the delay at half its ceiling, 50, 100, 200, 400, 800, 1600 ms,
// so 7 re-puts in 5 s at most, not one per round trip (a count that does not
// grow, or restarts at each quick loss, writes at the speed of etcd).
func TestRepeatedLossesSlowTheRePuts(t *testing.T) {
	const window = 5 * time.Second
	e := coordtest.Etcd(t)
	cli, op := e.Client(t), e.Client(t)
	tenant := coordtest.Tenant(t)
	half := func(c int64) int64 { return c / 2 }
	r := register(t, cli, membership.Config{Tenant: tenant, Service: "api", Instance: "pod-1",
		SessionConfig: membership.SessionConfig{TTL: 10 * time.Second, Backoff: coord.Backoff{Rand: half}}})
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	wch := op.Watch(wctx, r.Key(), clientv3.WithRev(r.Status().ModRevision))
	end := time.After(window)
	puts := 0
	for done := false; !done; {
		select {
		case <-end:
			done = true
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil {
				t.Fatalf("watch of the instance's key ended: %v", wr.Err())
			}
			for _, ev := range wr.Events {
				if ev.Type != clientv3.EventTypePut {
					continue
				}
				puts++
				dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := op.Delete(dctx, r.Key())
				dcancel()
				if err != nil {
					t.Fatalf("delete of the instance's key: %v", err)
				}
			}
		}
	}
	if puts < 3 {
		t.Fatalf("the key was put %d times in %v: the registration stopped re-registering", puts, window)
	}
	if puts > 12 {
		t.Fatalf("the key was put %d times in %v: repeated losses are re-put without a growing backoff", puts, window)
	}
	if st := r.Status(); st.Losses < puts-1 {
		t.Fatalf("status counts %d losses for %d deletes", st.Losses, puts)
	}
	t.Logf("%d puts in %v", puts, window)
}

// TestLossOneTTLAfterThePutRestartsTheBackoff: the attempt count of the
// re-puts restarts when the key stayed registered for a TTL — a TTL included,
// not only longer: on the registration's clock (a fake one), a first quick loss
// is re-put after the first backoff round and bumps the count; a second loss
// exactly one TTL after that put is an isolated loss again, re-put after the
// first round (ceiling DefaultBackoffBase), not the second.
func TestLossOneTTLAfterThePutRestartsTheBackoff(t *testing.T) {
	const ttl = 10 * time.Second
	e := coordtest.Etcd(t)
	cli, op := e.Client(t), e.Client(t)
	clk := coordtest.NewFakeClock(time.Now())
	var mu sync.Mutex
	var ceilings []time.Duration
	record := func(c int64) int64 {
		mu.Lock()
		defer mu.Unlock()
		ceilings = append(ceilings, time.Duration(c))
		return 0
	}
	r := register(t, cli, membership.Config{Tenant: coordtest.Tenant(t), Service: "api", Instance: "pod-1",
		SessionConfig: membership.SessionConfig{TTL: ttl, Clock: clk, Backoff: coord.Backoff{Rand: record}}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, advance := range []time.Duration{0, ttl} {
		clk.Advance(advance)
		before := r.Status().Registrations
		if _, err := op.Delete(ctx, r.Key()); err != nil {
			t.Fatal(err)
		}
		coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "re-registration after the loss", func() bool {
			return r.Status().Registrations == before+1
		})
	}
	mu.Lock()
	defer mu.Unlock()
	want := []time.Duration{membership.DefaultBackoffBase, membership.DefaultBackoffBase}
	if !slices.Equal(ceilings, want) {
		t.Fatalf("re-puts after a quick loss and a loss one TTL after the put drew under ceilings %v, want %v", ceilings, want)
	}
}
