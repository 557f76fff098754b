package failstatic_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// conf is the T of the tests: the snapshot as a map of full key → value.
type conf map[string]string

func decodeConf(kvs []failstatic.KV) (conf, error) {
	m := make(conf, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = string(kv.Value)
	}
	return m, nil
}

var errInvalid = errors.New("value INVALID present")

func validateConf(c conf) error {
	for k, v := range c {
		if v == "INVALID" {
			return fmt.Errorf("%s: %w", k, errInvalid)
		}
	}
	return nil
}

// testPrefix returns a fresh tenant config prefix.
func testPrefix(t testing.TB) string {
	t.Helper()
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	p, err := coord.Prefix(name, coord.KindConfig)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// etcdPrefix returns the test etcd, a client of it and a fresh tenant config
// prefix.
func etcdPrefix(t testing.TB) (*coordtest.EtcdServer, *clientv3.Client, string) {
	t.Helper()
	e := coordtest.Etcd(t)
	return e, e.Client(t), testPrefix(t)
}

// blackholed returns a client whose only endpoint is a proxy of e that drops
// everything (etcd "down"), and the proxy.
func blackholed(t testing.TB, e *coordtest.EtcdServer) (*clientv3.Client, *coordtest.Proxy) {
	t.Helper()
	proxy := coordtest.NewProxy(t, strings.TrimPrefix(e.Endpoints[0], "http://"))
	proxy.Blackhole()
	return coordtest.NewEtcdClient(t, proxy.URL()), proxy
}

func quietLogger() *slog.Logger {
	if os.Getenv("FAILSTATIC_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func baseConfig(prefix string) failstatic.Config[conf] {
	return failstatic.Config[conf]{
		Prefix:   prefix,
		Decode:   decodeConf,
		Validate: validateConf,
		Logger:   quietLogger(),
	}
}

func mustNew(t testing.TB, cli *clientv3.Client, cfg failstatic.Config[conf]) *failstatic.Cache[conf] {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := failstatic.New(ctx, cli, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// withState runs a cache of cfg on cli once, with a state file of the test's
// own, and returns cfg with that StatePath and the snapshot the file holds.
func withState(t testing.TB, cli *clientv3.Client, cfg failstatic.Config[conf]) (failstatic.Config[conf], failstatic.Snapshot[conf]) {
	t.Helper()
	cfg.StatePath = filepath.Join(t.TempDir(), "state")
	c := mustNew(t, cli, cfg)
	s := c.Get()
	if err := c.Close(); err != nil { // writes what is pending
		t.Fatal(err)
	}
	return cfg, s
}

func put(t testing.TB, cli *clientv3.Client, k, v string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := cli.Put(ctx, k, v)
	if err != nil {
		t.Fatalf("put %s: %v", k, err)
	}
	return r.Header.Revision
}

// etcdState reads the prefix from etcd as a conf, with its revision.
func etcdState(t testing.TB, cli *clientv3.Client, prefix string) (conf, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("get %s: %v", prefix, err)
	}
	m := conf{}
	for _, kv := range r.Kvs {
		m[string(kv.Key)] = string(kv.Value)
	}
	return m, r.Header.Revision
}

func equalConf(a, b conf) bool { return maps.Equal(a, b) }

// recorder collects every update a subscription delivers.
type recorder struct {
	start   conf // the state before the first delivered change
	mu      sync.Mutex
	snaps   []failstatic.Snapshot[conf]
	changes []failstatic.Change
}

func (r *recorder) fn(s failstatic.Snapshot[conf], ch []failstatic.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.snaps = append(r.snaps, s)
	r.changes = append(r.changes, ch...)
}

func (r *recorder) get() ([]failstatic.Snapshot[conf], []failstatic.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]failstatic.Snapshot[conf](nil), r.snaps...), append([]failstatic.Change(nil), r.changes...)
}

// checkOrdered fails unless snapshot revisions strictly increase and change
// revisions never decrease.
func (r *recorder) checkOrdered(t testing.TB) {
	t.Helper()
	snaps, changes := r.get()
	for i := 1; i < len(snaps); i++ {
		if snaps[i].Revision <= snaps[i-1].Revision {
			t.Fatalf("snapshot %d revision %d after %d: out of order", i, snaps[i].Revision, snaps[i-1].Revision)
		}
	}
	for i := 1; i < len(changes); i++ {
		if changes[i].ModRevision < changes[i-1].ModRevision {
			t.Fatalf("change %d (%s@%d) after %s@%d: out of order", i, changes[i].Key, changes[i].ModRevision, changes[i-1].Key, changes[i-1].ModRevision)
		}
	}
}

// flipByte corrupts one byte of the file at path (i < 0 counts from the end).
func flipByte(t testing.TB, path string, i int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if i < 0 {
		i += len(b)
	}
	b[i] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
