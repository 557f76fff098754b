package reliability

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/testing/coordtest"
	"google.golang.org/grpc"
)

// TestCampaignOutlivesAuthToken: etcd auth with simple tokens that expire after
// 2 s; a tenant's waiter campaigns behind a holder for several token lifetimes.
// When the holder releases, the waiter still acquires — with its key in place —
// and both sessions kept their leases alive across the expiries.
func TestCampaignOutlivesAuthToken(t *testing.T) {
	const tokenTTL = 2
	res := coordtest.NewResult(t, "auth tokens expire while a campaign waits",
		coordtest.Faults("holder's token expiries (re-authentications)", "waiter's token expiries (re-authentications)"))
	defer coordtest.Report(t, res)

	cluster := coordtest.EtcdCluster(t, 1, &coordtest.EtcdClusterOpts{AuthToken: "simple", AuthTTL: tokenTTL})
	enableTenantAuth(t, cluster.Endpoints(), "acme")
	// Two logins of the tenant, the holder's and the waiter's, each counting its
	// Authenticate calls: after the login, each one is the client refreshing a
	// token that etcd rejected as expired.
	var holderAuth, waiterAuth authCount
	holderCli := tenantLogin(t, cluster.Endpoints(), "acme", holderAuth.dialOption())
	waiterClients := tenantLogin(t, cluster.Endpoints(), "acme", waiterAuth.dialOption())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// After a token expires, the next keepalive re-authenticates first (etcd's
	// Authenticate checks a bcrypt hash: 0.5 s and more on a loaded 2-core box). With
	// TTL 3 s the default keepalive timeout (TTL/6 = 500 ms) is shorter than that
	// and both sessions step down; give the keepalive room for the refresh.
	cfg := correctnesslease.Config{Tenant: "acme", TTL: 6 * time.Second, KeepaliveTimeout: 1900 * time.Millisecond, Logger: quiet}

	hs, err := correctnesslease.NewSession(ctx, holderCli, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close(context.Background())
	held, err := correctnesslease.Acquire(ctx, hs, "scheduler")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := correctnesslease.NewSession(ctx, waiterClients, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close(context.Background())
	type result struct {
		l   *correctnesslease.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := correctnesslease.Acquire(ctx, ws, "scheduler")
		got <- result{l, err}
	}()

	wait := time.Duration(3*tokenTTL+1) * time.Second
	select {
	case r := <-got:
		t.Fatalf("waiter returned while the lease was held: %v", r.err)
	case <-time.After(wait):
	}
	res.Faults["holder's token expiries (re-authentications)"] = holderAuth.refreshes()
	res.Faults["waiter's token expiries (re-authentications)"] = waiterAuth.refreshes()
	res.Notes = "First run with TTL 3 s: the keepalives sent after the 2 s token expired took longer than the default keepalive timeout (TTL/6 = 500 ms; observed 504 ms and 525 ms, then cancelled) — the client re-authenticates first and etcd checks a bcrypt hash — and both sessions stepped down. With auth on, set KeepaliveTimeout above the Authenticate latency. This run: TTL 6 s, keepalive timeout 1.9 s."
	if held.Context().Err() != nil {
		t.Fatalf("holder lost authority across token expiries: %v", context.Cause(held.Context()))
	}
	if err := held.Release(ctx); err != nil {
		t.Fatalf("release after token expiry: %v", err)
	}
	released := time.Now()
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("waiter failed after token expiry: %v", r.err)
		}
		defer r.l.Release(context.Background())
		if r.l.Context().Err() != nil {
			t.Fatalf("waiter's lease born without authority: %v", context.Cause(r.l.Context()))
		}
		resp, err := waiterClients.Get(ctx, r.l.Key())
		if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != r.l.Token().Revision() {
			t.Fatalf("waiter holds a lease without its key (etcd#19597): %v", err)
		}
		res.Outcome["handover ms after release"] = time.Since(released).Milliseconds()
		res.Outcome["acquired with key"] = 1
		res.Trials = 1
	case <-time.After(15 * time.Second):
		t.Fatal("waiter never acquired after the holder released")
	}
}

// authCount counts a client's Authenticate calls.
type authCount struct{ calls atomic.Int64 }

func (a *authCount) dialOption() grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if method == "/etcdserverpb.Auth/Authenticate" && err == nil {
			a.calls.Add(1)
		}
		return err
	})
}

// refreshes is the number of successful Authenticate calls after the login: the
// client makes one when etcd rejects its token as expired (invalid auth token).
func (a *authCount) refreshes() int { return max(0, int(a.calls.Load())-1) }
