package reliability

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/efficiencylock"
	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/testing/coordtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap"
)

// TestSecretsCanary: credentials — a password in the PostgreSQL DSN, etcd user
// passwords, a Redis password — never appear in what the SDK logs, in the errors
// it returns (including %+v), or in its spans, on success paths and failure paths.
func TestSecretsCanary(t *testing.T) {
	const (
		pgSecret    = "CANARY-pg-5f2a91"
		etcdSecret  = "CANARY-etcd-77c3e0"
		redisSecret = "CANARY-redis-0b9d4e"
	)
	res := coordtest.NewResult(t, "secrets canary", coordtest.Faults("etcd login with a wrong password", "etcd permission denied", "idempotency key reused", "postgres connect to a missing database", "redis lock contended", "stale token presented"))
	defer coordtest.Report(t, res)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	spans := tracetest.NewInMemoryExporter()
	tp := trace.NewTracerProvider(trace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}

	// PostgreSQL: a DSN with a password (loopback trust auth accepts it).
	db := coordtest.Postgres(t)
	u, _ := url.Parse(db.URL)
	u.User = url.UserPassword(u.User.Username(), pgSecret)
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// Each fault below counts when the error it must cause was seen.
	bad := *u
	bad.Path = "/no_such_database_canary"
	badPool, err := pgxpool.New(ctx, bad.String())
	if err == nil {
		err = badPool.Ping(ctx)
		badPool.Close()
	}
	keep(err)
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "3D000" { // invalid_catalog_name
		res.Faults["postgres connect to a missing database"]++
	}

	fence, err := pgfence.New(pgfence.Config{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	keep(fence.Migrate(ctx, pool))
	newer, _ := coord.ParseToken("/tenants/acme/elections/canary@9")
	older, _ := coord.ParseToken("/tenants/acme/elections/canary@3")
	keep(fence.Exec(ctx, pool, newer, func(context.Context, pgx.Tx) error { return nil }))
	stale := fence.Exec(ctx, pool, older, func(context.Context, pgx.Tx) error { return nil })
	if !errors.Is(stale, coord.ErrStaleToken) {
		t.Fatalf("stale token not rejected: %v", stale)
	}
	keep(stale)
	res.Faults["stale token presented"]++

	store, err := idempotency.New(pool, idempotency.Config{Logger: logger, Table: "canary_keys"})
	if err != nil {
		t.Fatal(err)
	}
	keep(store.Migrate(ctx, pool))
	key := idempotency.Key{Scope: "acme", ID: "canary-1"}
	fp1, fp2 := idempotency.FingerprintOf([]byte("a")), idempotency.FingerprintOf([]byte("b"))
	_, err = store.Do(ctx, key, fp1, func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		return idempotency.Response{Status: 201, Body: []byte("ok")}, nil
	}, nil)
	keep(err)
	_, mismatch := store.Do(ctx, key, fp2, func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		return idempotency.Response{}, nil
	}, nil)
	if !errors.Is(mismatch, idempotency.ErrMismatch) {
		t.Fatalf("key reuse with another request: %v, want ErrMismatch", mismatch)
	}
	keep(mismatch)
	res.Faults["idempotency key reused"]++

	// etcd with auth: a tenant user with a password, and a login with a wrong one.
	cluster := coordtest.EtcdCluster(t, 1, nil)
	admin := coordtest.NewEtcdClient(t, cluster.Endpoints()...)
	for _, step := range []func() error{
		func() error { _, err := admin.RoleAdd(ctx, "root"); return err },
		func() error { _, err := admin.UserAdd(ctx, "root", etcdSecret+"-root"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.RoleAdd(ctx, "acme"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "acme", "/tenants/acme/", clientv3.GetPrefixRangeEnd("/tenants/acme/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := admin.UserAdd(ctx, "acme", etcdSecret); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "acme", "acme"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	login := func(password string) (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints(), Username: "acme", Password: password,
			DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
	}
	cli, err := login(etcdSecret)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	wrong, err := login(etcdSecret + "-wrong")
	if err == nil {
		_, err = correctnesslease.NewSession(ctx, wrong, correctnesslease.Config{Tenant: "acme", TTL: 3 * time.Second, Logger: logger, TracerProvider: tp})
		wrong.Close()
	}
	keep(err)
	if errors.Is(err, rpctypes.ErrAuthFailed) || errors.Is(err, rpctypes.ErrGRPCAuthFailed) {
		res.Faults["etcd login with a wrong password"]++
	}

	sess, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: "acme", TTL: 3 * time.Second, Logger: logger, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	l, err := correctnesslease.Acquire(ctx, sess, "canary")
	if err != nil {
		t.Fatal(err)
	}
	keep(l.Release(ctx))
	keep(sess.Close(ctx))
	// A tenant reaching outside its prefix: permission denied.
	_, denied := failstatic.New(ctx, cli, failstatic.Config[int]{
		Prefix:         "/tenants/globex/config/",
		Decode:         func([]failstatic.KV) (int, error) { return 0, nil },
		Logger:         logger,
		InitialTimeout: 2 * time.Second,
	})
	if denied == nil {
		t.Fatal("failstatic read another tenant's prefix")
	}
	keep(denied)
	if errors.Is(denied, rpctypes.ErrPermissionDenied) || errors.Is(denied, rpctypes.ErrGRPCPermissionDenied) {
		res.Faults["etcd permission denied"]++
	}

	// Redis with a password in its options (the local server has none; go-redis
	// tolerates that), on the success path and on the contention path.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", Password: redisSecret})
	defer rdb.Close()
	locker, err := efficiencylock.New(rdb, efficiencylock.DuplicatesHarmless("canary: a test"), efficiencylock.Config{Tenant: "acme", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	lockName := "canary-" + coordtest.Redis(t).Tenant // unique per run
	held, err := locker.TryAcquire(ctx, lockName, 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, busy := locker.TryAcquire(ctx, lockName, 5*time.Second, nil)
	if !errors.Is(busy, efficiencylock.ErrNotAcquired) {
		t.Fatalf("second acquisition: %v", busy)
	}
	keep(busy)
	keep(held.Release(ctx))
	res.Faults["redis lock contended"]++

	// Everything the SDK produced, in every form a user might print it.
	var surfaces []string
	surfaces = append(surfaces, logs.String())
	for _, err := range errs {
		surfaces = append(surfaces, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
	}
	for _, values := range []any{sess, l, fence, store, locker} {
		surfaces = append(surfaces, fmt.Sprintf("%+v", values), fmt.Sprintf("%#v", values))
	}
	for _, s := range spans.GetSpans() {
		surfaces = append(surfaces, fmt.Sprintf("%+v", s.Attributes), fmt.Sprintf("%+v", s.Events), s.Status.Description, s.Name)
	}
	leaks := 0
	for _, s := range surfaces {
		for _, secret := range []string{pgSecret, etcdSecret, redisSecret} {
			if strings.Contains(s, secret) {
				leaks++
				t.Errorf("secret %q leaked in: %.300s", secret, s)
			}
		}
	}
	if len(errs) < 5 || len(spans.GetSpans()) == 0 || logs.Len() == 0 {
		t.Fatalf("too little was inspected to prove anything: %d errors, %d spans, %d bytes of logs", len(errs), len(spans.GetSpans()), logs.Len())
	}
	res.Trials = len(surfaces)
	res.Outcome["errors inspected"] = int64(len(errs))
	res.Outcome["spans inspected"] = int64(len(spans.GetSpans()))
	res.Outcome["log bytes inspected"] = int64(logs.Len())
	res.Outcome["secrets leaked"] = int64(leaks)
}
