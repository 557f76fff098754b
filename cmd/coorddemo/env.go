package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// quiet is the logger of the SDK's components here: the demo tells its story
// in steps, not in their logs.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is what every part shares: an embedded etcd and a private PostgreSQL schema.
type env struct {
	etcdDir string
	etcd    *coordtest.EtcdServer
	baseURL string // the server
	url     string // the demo's schema as search_path
	schema  string
	pool    *pgxpool.Pool
}

func newEnv(ctx context.Context, pgURL string) (*env, error) {
	e := &env{baseURL: pgURL}
	var err error
	if e.etcdDir, err = os.MkdirTemp("", "coorddemo-etcd-"); err != nil {
		return nil, err
	}
	if e.etcd, err = coordtest.StartEtcd(e.etcdDir); err != nil {
		os.RemoveAll(e.etcdDir)
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	admin, err := pgx.Connect(cctx, pgURL)
	if err != nil {
		e.close()
		return nil, fmt.Errorf("PostgreSQL is not reachable (%v): start it with scripts/services.sh", err)
	}
	defer admin.Close(ctx)
	b := make([]byte, 4)
	rand.Read(b)
	e.schema = "coorddemo_" + hex.EncodeToString(b)
	if _, err := admin.Exec(cctx, "CREATE SCHEMA "+pgx.Identifier{e.schema}.Sanitize()); err != nil {
		e.close()
		return nil, err
	}
	u, _ := url.Parse(pgURL)
	q := u.Query()
	q.Set("search_path", e.schema)
	u.RawQuery = q.Encode()
	e.url = u.String()
	if e.pool, err = pgxpool.New(ctx, e.url); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *env) etcdEndpoint() string { return e.etcd.Endpoints[0] }

// etcdClient returns a new client of the embedded etcd; the caller closes it.
func (e *env) etcdClient() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: e.etcd.Endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
}

// stopEtcd stops the embedded etcd (the config part does this on purpose).
func (e *env) stopEtcd() {
	if e.etcd != nil {
		e.etcd.Close()
		e.etcd = nil
	}
}

func (e *env) close() {
	if e.pool != nil {
		e.pool.Close()
	}
	if e.schema != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, e.baseURL); err == nil {
			c.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{e.schema}.Sanitize()+" CASCADE")
			c.Close(ctx)
		}
	}
	e.stopEtcd()
	os.RemoveAll(e.etcdDir)
}

// setUp creates a fenced scenario's tables (schema) and the fence's, with cfg;
// it returns what failed, "" when nothing did.
func (e *env) setUp(ctx context.Context, schema string, cfg pgfence.Config) string {
	if _, err := e.pool.Exec(ctx, schema); err != nil {
		return "setup failed: " + err.Error()
	}
	fence, err := pgfence.New(cfg)
	if err != nil {
		return err.Error()
	}
	if err := fence.Migrate(ctx, e.pool); err != nil {
		return "migrate: " + err.Error()
	}
	return ""
}
