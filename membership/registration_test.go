package membership_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestRegisterAndDeregister(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	m := newMetrics(t)
	tenant := coordtest.Tenant(t)
	ctx := context.Background()
	r, err := membership.Register(ctx, cli, membership.Config{
		Tenant: tenant, Service: "api", Instance: "pod-1", Addr: "10.0.0.1:8080",
		Metadata:      map[string]string{"zone": "a", "version": "1.2.3"},
		SessionConfig: membership.SessionConfig{TTL: 5 * time.Second, Logger: coordtest.Logger(t), MeterProvider: m},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Key() != "/tenants/"+tenant+"/members/api/pod-1" {
		t.Fatalf("key %q", r.Key())
	}
	resp, err := get(t, cli, r.Key())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("key not in etcd: %v %v", resp, err)
	}
	kv := resp.Kvs[0]
	var v struct {
		Addr     string            `json:"addr"`
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal(kv.Value, &v); err != nil || v.Addr != "10.0.0.1:8080" || v.Metadata["zone"] != "a" {
		t.Fatalf("value %s: %v", kv.Value, err)
	}
	st := r.Status()
	if !st.Registered || !r.Registered() || st.Lease != clientv3.LeaseID(kv.Lease) || st.CreateRevision != kv.CreateRevision ||
		st.ModRevision != kv.ModRevision || st.Registrations != 1 || st.Losses != 0 {
		t.Fatalf("status %+v, key %+v", st, kv)
	}
	ttl, err := cli.TimeToLive(ctx, st.Lease)
	if err != nil || ttl.TTL <= 0 || ttl.GrantedTTL != 5 {
		t.Fatalf("lease: %+v %v", ttl, err)
	}
	if got := m.sum("coordkit.membership.registered", attribute.String("coordkit.membership.instance", "pod-1")); got != 1 {
		t.Fatalf("registered gauge = %d, want 1", got)
	}

	if err := r.Deregister(ctx); err != nil {
		t.Fatal(err)
	}
	if resp, _ := get(t, cli, r.Key()); len(resp.Kvs) != 0 {
		t.Fatal("key still there after Deregister")
	}
	if ttl, _ := cli.TimeToLive(ctx, st.Lease); ttl.TTL != -1 {
		t.Fatalf("lease still alive after Deregister: %+v", ttl)
	}
	if r.Registered() || !r.Status().Closed {
		t.Fatalf("after Deregister: %+v", r.Status())
	}
	if err := r.Deregister(ctx); err != nil {
		t.Fatalf("second Deregister: %v", err)
	}
	if err := r.Update(ctx, nil); !errors.Is(err, membership.ErrClosed) {
		t.Fatalf("Update after Deregister: %v", err)
	}
	if got := m.sum("coordkit.membership.registered", attribute.String("coordkit.membership.instance", "pod-1")); got != 0 {
		t.Fatalf("registered gauge after Deregister = %d", got)
	}
}

// TestRegisterRejectsBadInput: every invalid input fails with a typed error
// before anything reaches etcd, and nothing is left behind.
func TestRegisterRejectsBadInput(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	tenant := coordtest.Tenant(t)
	ok := membership.Config{Tenant: tenant, Service: "api", Instance: "i1", SessionConfig: membership.SessionConfig{Logger: coordtest.Logger(t)}}
	with := func(f func(*membership.Config)) membership.Config { c := ok; f(&c); return c }
	cut := "zoné"[:4] // cut mid-rune
	cases := []struct {
		name string
		cfg  membership.Config
		want error
	}{
		{"empty tenant", with(func(c *membership.Config) { c.Tenant = "" }), coord.ErrInvalidName},
		{"slash in service", with(func(c *membership.Config) { c.Service = "a/b" }), coord.ErrInvalidName},
		{"dotdot instance", with(func(c *membership.Config) { c.Instance = ".." }), coord.ErrInvalidName},
		{"NUL in instance", with(func(c *membership.Config) { c.Instance = "a\x00b" }), coord.ErrInvalidName},
		{"invalid UTF-8 instance", with(func(c *membership.Config) { c.Instance = "a\xffb" }), coord.ErrInvalidName},
		{"instance cut mid-rune", with(func(c *membership.Config) { c.Instance = cut }), coord.ErrInvalidName},
		{"long instance", with(func(c *membership.Config) { c.Instance = strings.Repeat("x", coord.MaxNameLen+1) }), coord.ErrInvalidName},
		{"space in addr", with(func(c *membership.Config) { c.Addr = "10.0.0.1 :80" }), membership.ErrInvalidConfig},
		{"invalid UTF-8 metadata value", with(func(c *membership.Config) { c.Metadata = map[string]string{"k": "\xff"} }), membership.ErrInvalidConfig},
		{"metadata value cut mid-rune", with(func(c *membership.Config) { c.Metadata = map[string]string{"k": cut} }), membership.ErrInvalidConfig},
		{"NUL in metadata value", with(func(c *membership.Config) { c.Metadata = map[string]string{"k": "a\x00"} }), membership.ErrInvalidConfig},
		{"empty metadata key", with(func(c *membership.Config) { c.Metadata = map[string]string{"": "v"} }), membership.ErrInvalidConfig},
		{"control in metadata key", with(func(c *membership.Config) { c.Metadata = map[string]string{"a\nb": "v"} }), membership.ErrInvalidConfig},
		{"value over 64 KiB", with(func(c *membership.Config) { c.Metadata = map[string]string{"blob": strings.Repeat("x", 64<<10)} }), coord.ErrQuotaExceeded},
		{"TTL too short", with(func(c *membership.Config) { c.TTL = time.Second }), membership.ErrInvalidConfig},
		{"keepalive timeout too long", with(func(c *membership.Config) { c.TTL = 6 * time.Second; c.KeepaliveTimeout = 2 * time.Second }), membership.ErrInvalidConfig},
	}
	for _, tc := range cases {
		_, err := membership.Register(context.Background(), cli, tc.cfg)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
		var ce *membership.ConfigError
		if tc.want == coord.ErrInvalidName && (!errors.As(err, &ce) || !errors.Is(err, membership.ErrInvalidConfig) || ce.Field == "") {
			t.Errorf("%s: %v is not a *membership.ConfigError naming the field", tc.name, err)
		}
	}
	var qe *coord.QuotaError
	if _, err := membership.Register(context.Background(), cli, cases[13].cfg); !errors.As(err, &qe) || qe.Quota != "value_bytes" || qe.Tenant != tenant {
		t.Errorf("oversized value: %v", err)
	}
	if _, err := membership.Register(context.Background(), nil, ok); !errors.Is(err, membership.ErrInvalidConfig) {
		t.Errorf("nil client: %v", err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := membership.Register(cancelled, cli, ok); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
	// Nothing was left behind: no key, no lease.
	resp, err := cli.Get(context.Background(), "/tenants/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("keys left behind: %v %v", resp.Count, err)
	}
	leases, err := cli.Leases(context.Background())
	if err != nil || len(leases.Leases) != 0 {
		t.Fatalf("leases left behind: %v %v", leases, err)
	}
}

// TestOwnKeyDeletedReregistered: an operator deletes the instance's key; the
// registration notices through its own-key watch and puts it back, on the
// first attempt (one backoff round), under the same (live) lease.
func TestOwnKeyDeletedReregistered(t *testing.T) {
	res := coordtest.NewResult(t, "own key deleted by an operator: re-registered within one backoff round", coordtest.Faults("key deleted by operator"))
	defer coordtest.Report(t, res)
	t.Parallel()
	e := coordtest.Etcd(t)
	cli, op := e.Client(t), e.Client(t)
	m := newMetrics(t)
	tenant := coordtest.Tenant(t)
	const ttl = 2 * time.Second
	r := register(t, cli, membership.Config{Tenant: tenant, Service: "api", Instance: "pod-1",
		SessionConfig: membership.SessionConfig{TTL: ttl, MeterProvider: m}})
	trials := coordtest.Pick(3, 20)
	var worst time.Duration
	for i := range trials {
		before := r.Status()
		dr, err := op.Delete(context.Background(), r.Key())
		if err != nil || dr.Deleted != 1 {
			t.Fatalf("trial %d: operator delete: %v %v", i, dr, err)
		}
		deleted := time.Now()
		res.Faults["key deleted by operator"]++
		coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "re-registration", func() bool {
			st := r.Status()
			return st.Registrations == before.Registrations+1 && st.Registered
		})
		took := time.Since(deleted)
		worst = max(worst, took)
		st := r.Status()
		if st.Losses != before.Losses+1 || st.LastLoss.Reason != coord.LossKeyDeleted {
			t.Fatalf("trial %d: status %+v", i, st)
		}
		if st.Lease != before.Lease || st.CreateRevision <= dr.Header.Revision {
			t.Fatalf("trial %d: lease %x→%x, create revision %d (delete at %d)", i, before.Lease, st.Lease, st.CreateRevision, dr.Header.Revision)
		}
		resp, _ := get(t, cli, r.Key())
		if len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != st.CreateRevision {
			t.Fatalf("trial %d: key not back as recorded: %+v", i, resp.Kvs)
		}
		res.Trials++
		res.Outcome["re-registered"]++
		// Stay registered a full TTL, so the next delete is an isolated loss
		// again (the backoff restarts at its first round).
		time.Sleep(ttl)
	}
	losses := m.sum("coordkit.membership.losses", attribute.String(coord.AttrReason, string(coord.LossKeyDeleted)))
	if losses != int64(trials) {
		t.Fatalf("losses metric = %d, want %d", losses, trials)
	}
	res.Outcome["worst delete→re-registered ms"] = worst.Milliseconds()
	res.Notes = "first backoff round: full jitter in [0, 100 ms); every re-put succeeded on its first attempt (Registrations advanced by exactly 1)"
	t.Logf("%d deletes, each re-registered on the first attempt; worst delete→re-registered %v", trials, worst)
}

// TestRecord: Record returns Register's key and value without I/O, and refuses
// what Register refuses for its names and payload.
func TestRecord(t *testing.T) {
	key, value, err := membership.Config{Tenant: "acme", Service: "api", Instance: "i1", Metadata: map[string]string{"zone": "a"}}.Record()
	if err != nil || key != "/tenants/acme/members/api/i1" || value != `{"metadata":{"zone":"a"}}` {
		t.Fatalf("Record = %q %q %v", key, value, err)
	}
	if addr, md, ok := membership.DecodeRecord([]byte(value)); !ok || addr != "" || md["zone"] != "a" {
		t.Fatalf("DecodeRecord(%q) = %q %v %v", value, addr, md, ok)
	}
	if _, _, ok := membership.DecodeRecord([]byte("x")); ok {
		t.Fatal("DecodeRecord accepted a non-record")
	}
	if _, _, err := (membership.Config{Tenant: "acme", Service: "api", Instance: "a\x00b"}).Record(); !errors.Is(err, coord.ErrInvalidName) || !errors.Is(err, membership.ErrInvalidConfig) {
		t.Fatalf("NUL instance: %v", err)
	}
}

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
