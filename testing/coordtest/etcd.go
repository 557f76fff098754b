package coordtest

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// EtcdServer is a real etcd server embedded in the test process.
type EtcdServer struct {
	// Endpoints are the client URLs of the server.
	Endpoints []string
	etcd      *embed.Etcd
}

// Etcd starts a single-member etcd server in-process (go.etcd.io/etcd/server/v3,
// the same version as the client) on free loopback ports with its data in
// t.TempDir(). It is stopped when the test ends. It blocks until the server is
// ready, at most 30 s.
func Etcd(t testing.TB) *EtcdServer {
	t.Helper()
	s, err := StartEtcd(t.TempDir())
	if err != nil {
		t.Fatalf("coordtest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// StartEtcd starts an embedded single-member etcd server with its data in dir, on
// free loopback ports, and waits until it is ready (at most 30 s). The caller must
// Close it. It is Etcd without a test, for cmd/coorddemo.
func StartEtcd(dir string) (*EtcdServer, error) {
	cfg := embed.NewConfig()
	cfg.Name = "coordtest"
	cfg.Dir = dir
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	for attempt := 0; ; attempt++ {
		client, peer := mustURL(loopbackURL(freePort())), mustURL(loopbackURL(freePort()))
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			if attempt < 3 { // a free port taken between probe and bind
				continue
			}
			return nil, fmt.Errorf("start embedded etcd: %w", err)
		}
		select {
		case <-e.Server.ReadyNotify():
		case <-time.After(30 * time.Second):
			e.Close()
			return nil, fmt.Errorf("embedded etcd not ready after 30s")
		}
		return &EtcdServer{Endpoints: []string{client.String()}, etcd: e}, nil
	}
}

// Close stops the server and waits for it to release its ports and data.
func (s *EtcdServer) Close() { s.etcd.Close() }

// Client returns a client of the server, closed when the test ends.
func (s *EtcdServer) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return NewEtcdClient(t, s.Endpoints...)
}

// NewEtcdClient returns a client of the given endpoints with a 2 s dial timeout,
// closed when the test ends.
func NewEtcdClient(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("coordtest: etcd client for %v: %v", endpoints, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func mustURL(s string) url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return *u
}
