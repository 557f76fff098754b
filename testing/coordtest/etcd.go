package coordtest

import (
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
	cfg := embed.NewConfig()
	cfg.Name = "coordtest"
	cfg.Dir = t.TempDir()
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	var err error
	for attempt := 0; ; attempt++ {
		client, peer := mustURL(loopbackURL(FreePort(t))), mustURL(loopbackURL(FreePort(t)))
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		var e *embed.Etcd
		e, err = embed.StartEtcd(cfg)
		if err != nil {
			if attempt < 3 { // a free port taken between probe and bind
				continue
			}
			t.Fatalf("coordtest: start embedded etcd: %v", err)
		}
		select {
		case <-e.Server.ReadyNotify():
		case <-time.After(30 * time.Second):
			e.Close()
			t.Fatal("coordtest: embedded etcd not ready after 30s")
		}
		s := &EtcdServer{Endpoints: []string{client.String()}, etcd: e}
		t.Cleanup(e.Close)
		return s
	}
}

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
