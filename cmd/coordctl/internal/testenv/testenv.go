// Package testenv gives coordctl's tests a world to operate on: a real etcd and
// a real PostgreSQL schema, every component migrated, and the things an on-call
// meets — a held lease with a waiter and its fence row, registered members, a
// saga stuck retrying a failing step, a saga that needs a human, a parked
// outbox event, an idempotency key, config in etcd and a failstatic state file.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/audit"
	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/saga"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// Names of what Seed creates.
const (
	Tenant       = "acme"
	LeaseName    = "billing-leader"
	OtherLease   = "ledger-compactor"
	StuckSaga    = "order-1001"
	HumanSaga    = "transfer-77"
	PoisonKey    = "order-1001"
	IdemScope    = "acme"
	IdemKey      = "pay-7f3a"
	ConfigName   = "checkout"
	StuckError   = "payment provider: 503 Service Unavailable"
	ParkedError  = "broker: message too large (10485760 bytes > 1048576)"
	RefundFailed = "ledger: account 4411 is locked"
	// Members: two instances of MemberService on one membership session,
	// one of OtherService.
	MemberService = "checkout"
	OtherService  = "ledger-api"
	// SeedOwnership: OwnedGroup's partitions held by two members, and
	// AbandonedGroup, whose only member has closed: every partition unowned.
	OwnedGroup          = "invoices"
	OwnedPartitions     = 6
	AbandonedGroup      = "reports"
	AbandonedPartitions = 3
)

// Env is the world: servers, an admin over them, and what Seed made.
type Env struct {
	Etcd  *coordtest.EtcdServer
	Cli   *clientv3.Client
	DB    *coordtest.PostgresDB
	Admin *admin.Admin

	Holder    *correctnesslease.Lease
	Members   []*membership.Registration // MemberService's two, then OtherService's
	Owners    []*ownership.Member        // OwnedGroup's two (after SeedOwnership)
	ParkedID  outbox.ID
	StateFile string
}

// New starts etcd, makes a schema, migrates every component and coordctl's
// audit table, and returns an Admin over them.
func New(t testing.TB) *Env {
	t.Helper()
	e := &Env{Etcd: coordtest.Etcd(t), DB: coordtest.Postgres(t)}
	e.Cli = e.Etcd.Client(t)
	ctx := Ctx(t)
	fence, err := pgfence.New(pgfence.Config{})
	must(t, err)
	must(t, fence.Migrate(ctx, e.DB.Pool))
	ob, err := outbox.New(outbox.Config{})
	must(t, err)
	must(t, ob.Migrate(ctx, e.DB.Pool))
	sc, err := saga.NewClient(e.DB.Pool, saga.Config{Concurrency: 1})
	must(t, err)
	must(t, sc.Migrate(ctx, e.DB.Pool))
	_ = sc.Close()
	is, err := idempotency.New(e.DB.Pool, idempotency.Config{})
	must(t, err)
	must(t, is.Migrate(ctx, e.DB.Pool))
	trail, err := audit.New("", "")
	must(t, err)
	must(t, trail.Migrate(ctx, e.DB.Pool))
	e.Admin, err = admin.New(admin.Config{
		Etcd:        func(context.Context) (*clientv3.Client, error) { return e.Cli, nil },
		DB:          func(context.Context) (*pgxpool.Pool, error) { return e.DB.Pool, nil },
		EtcdMetrics: []string{e.Etcd.Endpoints[0] + "/metrics"},
		Logger:      Logger(t),
	})
	must(t, err)
	t.Cleanup(e.Admin.Close)
	return e
}

// Seeded is New with the world Seed creates: what most tests start from.
func Seeded(t testing.TB) *Env {
	t.Helper()
	e := New(t)
	e.Seed(t)
	return e
}

// Ctx is a context that ends with the test, bounded by two minutes.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Logger logs to the test.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t testing.TB }

// Write logs p to the test.
func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Seed creates the world's objects (see the package comment). It blocks until
// each is in place, each wait bounded and failing the test with what did not
// happen.
func (e *Env) Seed(t testing.TB) {
	t.Helper()
	e.seedLeases(t)
	e.seedMembers(t)
	e.seedSagas(t)
	e.seedOutbox(t)
	e.seedIdempotency(t)
	e.seedConfig(t)
}

func (e *Env) seedLeases(t testing.TB) {
	t.Helper()
	ctx := Ctx(t)
	session := func() *correctnesslease.Session {
		s, err := correctnesslease.NewSession(ctx, e.Cli, correctnesslease.Config{Tenant: Tenant, TTL: 10 * time.Second, Logger: Logger(t)})
		must(t, err)
		t.Cleanup(func() {
			c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.Close(c)
		})
		return s
	}
	a, b := session(), session()
	var err error
	e.Holder, err = correctnesslease.Acquire(ctx, a, LeaseName)
	must(t, err)
	_, err = correctnesslease.Acquire(ctx, a, OtherLease)
	must(t, err)
	wctx, stop := context.WithCancel(context.Background())
	waited := make(chan struct{})
	go func() { defer close(waited); _, _ = correctnesslease.Acquire(wctx, b, LeaseName) }()
	t.Cleanup(func() { stop(); <-waited })
	Wait(t, "the second session queued behind the holder", func() bool {
		l, err := correctnesslease.LeaseGet(ctx, e.Cli, Tenant, LeaseName)
		return err == nil && l.Waiters() == 1
	})
	must(t, pgfence.Exec(ctx, e.DB.Pool, e.Holder.Token(), func(context.Context, pgx.Tx) error { return nil }))
}

func (e *Env) seedMembers(t testing.TB) {
	t.Helper()
	ctx := Ctx(t)
	s, err := membership.NewSession(ctx, e.Cli, membership.SessionConfig{TTL: 10 * time.Second, Logger: Logger(t)})
	must(t, err)
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Close(c)
	})
	for _, c := range []membership.Config{
		{Tenant: Tenant, Service: MemberService, Instance: "checkout-7d9f", Addr: "10.0.0.7:8080", Metadata: map[string]string{"zone": "eu-west-1a", "version": "v1.42.0"}},
		{Tenant: Tenant, Service: MemberService, Instance: "checkout-b3e1", Addr: "10.0.0.9:8080", Metadata: map[string]string{"zone": "eu-west-1b", "version": "v1.42.0"}},
		{Tenant: Tenant, Service: OtherService, Instance: "ledger-0", Addr: "10.0.1.2:9090"},
	} {
		r, err := s.Register(ctx, c)
		must(t, err)
		e.Members = append(e.Members, r)
	}
}

// SeedOwnership makes OwnedGroup, settled (every partition held by the member
// the target names), and AbandonedGroup, whose member joined, held every
// partition and closed. It is apart from Seed: its partitions are correctness
// leases too, and the lease tests count those of Seed.
func (e *Env) SeedOwnership(t testing.TB) {
	t.Helper()
	e.Owners = []*ownership.Member{e.Join(t, OwnedGroup, OwnedPartitions, "eu-west-1a"), e.Join(t, OwnedGroup, OwnedPartitions, "eu-west-1b")}
	e.WaitSettled(t, OwnedGroup, OwnedPartitions, 2)
	gone := e.Join(t, AbandonedGroup, AbandonedPartitions, "eu-west-1c")
	e.WaitSettled(t, AbandonedGroup, AbandonedPartitions, 1)
	must(t, gone.Close())
	Wait(t, AbandonedGroup+"'s partitions and member key released", func() bool {
		m, err := ownership.GroupGet(Ctx(t), e.Cli, Tenant, AbandonedGroup)
		return err == nil && m.Unowned() == AbandonedPartitions && len(m.Members) == 0
	})
}

// Join makes a member of Tenant's group of p partitions on a session of its
// own, with metadata zone, that acknowledges revokes at once (as a drained
// worker would); it leaves when the test ends.
func (e *Env) Join(t testing.TB, group string, p int, zone string) *ownership.Member {
	t.Helper()
	ctx := Ctx(t)
	g, err := ownership.New(e.Cli, ownership.Config{Tenant: Tenant, Group: group, Partitions: p, DrainTimeout: 100 * time.Millisecond, Logger: Logger(t)})
	must(t, err)
	s, err := correctnesslease.NewSession(ctx, e.Cli, correctnesslease.Config{Tenant: Tenant, TTL: 10 * time.Second, Logger: Logger(t)})
	must(t, err)
	m, err := g.Join(ctx, s, map[string]string{"zone": zone})
	must(t, err)
	go func() {
		for ev := range m.Events() {
			if ev.Kind == ownership.Revoked {
				ev.Partition.Done()
			}
		}
	}()
	t.Cleanup(func() {
		_ = m.Close()
		<-m.Done()
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Close(c)
	})
	return m
}

// WaitSettled waits until group has p partitions and members members, every
// partition held by the member its target names.
func (e *Env) WaitSettled(t testing.TB, group string, p, members int) {
	t.Helper()
	ctx := Ctx(t)
	Wait(t, fmt.Sprintf("%s's %d partitions held by its %d members as the target assigns them", group, p, members), func() bool {
		m, err := ownership.GroupGet(ctx, e.Cli, Tenant, group)
		if err != nil || m.Partitions != p || len(m.Members) != members || m.Unowned() != 0 {
			return false
		}
		for _, a := range m.Owners {
			if a.Owner != a.Target {
				return false
			}
		}
		return true
	})
}

// Wait polls cond every 20 ms for at most 30 s and fails the test naming what.
func Wait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("testenv: timed out after 30s waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type order struct {
	Order string `json:"order"`
	Cents int    `json:"cents"`
}

func ok(context.Context, saga.StepContext, *order) error { return nil }

func (e *Env) seedSagas(t testing.TB) {
	t.Helper()
	ctx := Ctx(t)
	// order: charge-card fails technically, and the runner that saw it waits ten
	// minutes before the next attempt (a deterministic backoff): stuck.
	orderDef, err := saga.New("order",
		saga.Compensatable("reserve-stock", ok, ok),
		saga.Compensatable("charge-card", func(context.Context, saga.StepContext, *order) error { return errors.New(StuckError) }, ok),
		saga.Pivot("ship", ok),
		saga.Retriable("email-receipt", ok),
	)
	must(t, err)
	slow := e.sagaClient(t, "runner-orders-7c9d", coord.Backoff{Base: 10 * time.Minute, Cap: 10 * time.Minute, Rand: func(n int64) int64 { return n - 1 }}, orderDef)
	_, err = saga.Start(ctx, slow, orderDef, order{Order: "1001", Cents: 4999}, &saga.StartOpts{ID: StuckSaga})
	must(t, err)
	// transfer: credit is declined (a business failure), and undoing debit fails
	// every time: after three attempts the saga needs a human.
	transferDef, err := saga.New("transfer",
		saga.Compensatable("debit", ok, func(context.Context, saga.StepContext, *order) error { return errors.New(RefundFailed) }),
		saga.Compensatable("credit", func(context.Context, saga.StepContext, *order) error {
			return saga.Fail(errors.New("insufficient funds"))
		}, ok),
		saga.Pivot("settle", ok),
	)
	must(t, err)
	fast := e.sagaClient(t, "runner-transfers-2b41", coord.Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond}, transferDef)
	_, err = saga.Start(ctx, fast, transferDef, order{Order: "77", Cents: 120000}, &saga.StartOpts{ID: HumanSaga})
	must(t, err)

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 2)
	go func() { done <- slow.Run(runCtx) }()
	go func() { done <- fast.Run(runCtx) }()
	Wait(t, "order-1001 failing charge-card once and transfer-77 needing a human", func() bool {
		s, err1 := slow.SagaGet(ctx, StuckSaga)
		h, err2 := fast.SagaGet(ctx, HumanSaga)
		return err1 == nil && err2 == nil && s.Attempts == 1 && s.Step == 1 && h.State == saga.StateNeedsHuman
	})
	stop()
	for range 2 {
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("saga runner: %v", err)
		}
	}
}

func (e *Env) sagaClient(t testing.TB, owner string, b coord.Backoff, defs ...saga.AnyDefinition) *saga.Client {
	t.Helper()
	c, err := saga.NewClient(e.DB.Pool, saga.Config{Backoff: b, PollInterval: 50 * time.Millisecond, ClaimTTL: 5 * time.Second,
		Concurrency: 2, Logger: Logger(t), Owner: owner})
	must(t, err)
	t.Cleanup(func() { _ = c.Close() })
	must(t, c.Register(defs...))
	return c
}

type failing struct{}

// Publish fails every message of PoisonKey with ParkedError.
func (failing) Publish(_ context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if m.Key == PoisonKey {
			errs[i] = errors.New(ParkedError)
		}
	}
	return errs
}

func (e *Env) seedOutbox(t testing.TB) {
	t.Helper()
	ctx := Ctx(t)
	ob, err := outbox.New(outbox.Config{MaxAttempts: 2, PollInterval: 20 * time.Millisecond,
		Backoff: coord.Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond}})
	must(t, err)
	var ids []outbox.ID
	must(t, pgx.BeginFunc(ctx, e.DB.Pool, func(tx pgx.Tx) error {
		ids, err = ob.EnqueueBatchTx(ctx, tx, []outbox.Event{
			{Topic: "orders", Key: PoisonKey, Type: "order.invoice_attached", Payload: []byte(`{"order":"1001","invoice_pdf_bytes":10485760}`), JSON: true},
			{Topic: "orders", Key: PoisonKey, Type: "order.shipped", Payload: []byte(`{"order":"1001"}`), JSON: true},
			{Topic: "orders", Key: "order-1002", Type: "order.created", Payload: []byte(`{"order":"1002"}`), JSON: true},
		})
		return err
	}))
	e.ParkedID = ids[0]
	r, err := ob.NewRelay(e.DB.Pool, failing{})
	must(t, err)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	Wait(t, "the poison event parked and order-1002 published", func() bool {
		st, err := ob.Status(ctx, e.DB.Pool)
		return err == nil && st.Parked == 1 && st.PublishedInWindow == 1
	})
	stop()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("relay: %v", err)
	}
}

func (e *Env) seedIdempotency(t testing.TB) {
	t.Helper()
	s, err := idempotency.New(e.DB.Pool, idempotency.Config{})
	must(t, err)
	_, err = s.Do(Ctx(t), idempotency.Key{Scope: IdemScope, ID: IdemKey}, idempotency.FingerprintOf([]byte(`POST /payments {"cents":4999}`)),
		func(context.Context, pgx.Tx) (idempotency.Response, error) {
			return idempotency.Response{Status: 201, Header: map[string][]string{"Location": {"/payments/981"}}, Body: []byte(`{"id":981}`)}, nil
		}, nil)
	must(t, err)
}

func (e *Env) seedConfig(t testing.TB) {
	t.Helper()
	ctx := Ctx(t)
	key, err := coord.Key(Tenant, coord.KindConfig, ConfigName)
	must(t, err)
	_, err = e.Cli.Put(ctx, key, `{"new_checkout":true,"max_cart_items":50}`)
	must(t, err)
	prefix, _ := coord.Prefix(Tenant, coord.KindConfig)
	e.StateFile = filepath.Join(t.TempDir(), "checkout.state")
	c, err := failstatic.New(ctx, e.Cli, failstatic.Config[int]{Prefix: prefix, StatePath: e.StateFile, Logger: Logger(t),
		Decode: func(kvs []failstatic.KV) (int, error) { return len(kvs), nil }})
	must(t, err)
	must(t, c.Close())
	if _, err := os.Stat(e.StateFile); err != nil {
		t.Fatalf("failstatic wrote no state file: %v", err)
	}
	// A change the state file has not seen: it is behind etcd.
	_, err = e.Cli.Put(ctx, key, `{"new_checkout":false,"max_cart_items":50}`)
	must(t, err)
}
