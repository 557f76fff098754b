package failstatic_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/failstatic"
)

// exampleEtcd starts a throw-away embedded etcd (examples have no *testing.T for
// coordtest) and returns a client and a stop function.
func exampleEtcd() (*clientv3.Client, func()) {
	dir, err := os.MkdirTemp("", "failstatic-example-*")
	if err != nil {
		panic(err)
	}
	free := func() url.URL {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		defer l.Close()
		return url.URL{Scheme: "http", Host: l.Addr().String()}
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cu, pu := free(), free()
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		panic(err)
	}
	<-e.Server.ReadyNotify()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cu.String()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		panic(err)
	}
	return cli, func() { cli.Close(); e.Close(); os.RemoveAll(dir) }
}

// Flags is an example config type decoded from a prefix of "name" → "on"/"off".
type Flags map[string]bool

// Feature flags for tenant "acme", served lock-free, validated before adoption
// and persisted for starts during an etcd outage.
func ExampleNew() {
	cli, stop := exampleEtcd()
	defer stop()
	ctx := context.Background()
	prefix, err := coord.Prefix("acme", coord.KindConfig)
	if err != nil {
		panic(err)
	}
	for _, k := range []string{"checkout", "revocations/tok-1"} {
		if _, err := cli.Put(ctx, prefix+k, "on"); err != nil {
			panic(err)
		}
	}
	dir, err := os.MkdirTemp("", "failstatic-example-*")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	cache, err := failstatic.New(ctx, cli, failstatic.Config[Flags]{
		Prefix: prefix,
		Decode: func(kvs []failstatic.KV) (Flags, error) {
			f := Flags{}
			for _, kv := range kvs {
				switch v := string(kv.Value); v {
				case "on", "off":
					f[kv.Key[len(prefix):]] = v == "on"
				default:
					return nil, fmt.Errorf("flag %s: value %q is not on/off", kv.Key, v)
				}
			}
			return f, nil
		},
		StatePath: filepath.Join(dir, "flags.state"),
		Classes:   []failstatic.KeyClass{{Name: "revocations", Prefix: "revocations/", MaxStaleness: 30 * time.Second}},
	})
	if err != nil {
		panic(err)
	}
	defer cache.Close()

	s := cache.Get()
	fmt.Println("checkout:", s.Value["checkout"], "source:", s.Source)

	// A bad push is rejected; the last good snapshot keeps serving.
	cli.Put(ctx, prefix+"checkout", "maybe")
	for cache.Status().Rejected == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	fmt.Println("after bad push, checkout:", cache.Get().Value["checkout"], "rejected:", errors.Is(cache.Status().LastRejection, failstatic.ErrRejected))

	// A revocation is read through Lookup: it would fail closed with ErrStale
	// after 30 s without confirmation.
	_, err = cache.Lookup(prefix + "revocations/tok-1")
	fmt.Println("revocation lookup error:", err)
	// Output:
	// checkout: true source: live
	// after bad push, checkout: true rejected: true
	// revocation lookup error: <nil>
}
