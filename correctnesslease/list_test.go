package correctnesslease

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
)

func TestListShowsHolderWaitersAndSessions(t *testing.T) {
	cli, a, b := twoSessions(t)
	tenant := a.Tenant()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	other := newSession(t, cli, Config{Tenant: tenant + "-x", TTL: testTTL})
	la, err := Acquire(ctx, a, "leader")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(ctx, other, "solo"); err != nil {
		t.Fatal(err)
	}
	wctx, stopWaiting := context.WithCancel(ctx)
	waiting := acquireInBackground(wctx, b, "leader", nil)
	defer func() { stopWaiting(); <-waiting }()

	var got LeaseState
	for deadline := time.Now().Add(10 * time.Second); ; {
		if got, err = LeaseGet(ctx, cli, tenant, "leader"); err != nil {
			t.Fatal(err)
		}
		if got.Waiters() == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b never queued behind a: %+v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	h, ok := got.Holder()
	if !ok || h.Key != la.Key() || h.CreateRevision != la.Token().Revision() || h.LeaseID != int64(a.LeaseID()) {
		t.Fatalf("holder %+v, want key %s rev %d lease %x", h, la.Key(), la.Token().Revision(), a.LeaseID())
	}
	if got.Prefix != la.Token().Lease() {
		t.Fatalf("prefix %q, token lease %q", got.Prefix, la.Token().Lease())
	}
	if !strings.Contains(h.Session, " pid ") || h.TTL <= 0 {
		t.Fatalf("holder session %q ttl %d: want the member value and a live TTL", h.Session, h.TTL)
	}
	if w := got.Queue[1]; w.LeaseID != int64(b.LeaseID()) {
		t.Fatalf("waiter %+v, want lease %x", w, b.LeaseID())
	}

	all, err := LeaseList(ctx, cli, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range all {
		if strings.HasPrefix(s.Tenant, tenant) {
			names = append(names, s.Tenant+"/"+s.Name)
		}
	}
	if want := tenant + "/leader," + tenant + "-x/solo"; strings.Join(names, ",") != want {
		t.Fatalf("List(all) = %v, want %s", names, want)
	}
	one, err := LeaseList(ctx, cli, tenant)
	if err != nil || len(one) != 1 || one[0].Name != "leader" {
		t.Fatalf("List(tenant) = %+v, %v", one, err)
	}

	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if empty, err := LeaseGet(ctx, cli, tenant+"-x", "nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("LeaseGet of a lease nobody holds or waits for = %+v, %v; want ErrNotFound", empty, err)
	}
	if old, err := Get(ctx, cli, tenant+"-x", "nobody"); err != nil || len(old.Queue) != 0 || old.Name != "nobody" {
		t.Fatalf("the deprecated Get of an unheld lease = %+v, %v; want an empty queue, as before", old, err)
	}
	if _, err := LeaseGet(ctx, cli, tenant, "a/b"); !errors.Is(err, coord.ErrInvalidName) {
		t.Fatalf("Get(invalid name) = %v, want ErrInvalidName", err)
	}
}
