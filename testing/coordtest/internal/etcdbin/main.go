// Command etcdbin is a minimal etcd server built from go.etcd.io/etcd/server/v3/embed,
// the same version as the client coordkit uses. coordtest.EtcdCluster spawns it as
// separate processes so tests can SIGSTOP, SIGKILL and restart members.
package main

import (
	"flag"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/coordkit/coordkit/testing/coordtest/internal/orphan"
)

func main() {
	orphan.ExitWithParent()
	cfg := embed.NewConfig()
	var client, peer string
	flag.StringVar(&cfg.Name, "name", "m0", "member name")
	flag.StringVar(&cfg.Dir, "data-dir", "", "data directory")
	flag.StringVar(&client, "client-url", "", "client URL (listen and advertise)")
	flag.StringVar(&peer, "peer-url", "", "peer URL (listen and advertise)")
	flag.StringVar(&cfg.InitialCluster, "initial-cluster", "", "name=peerURL,...")
	flag.StringVar(&cfg.ClusterState, "initial-cluster-state", "new", "new or existing")
	flag.StringVar(&cfg.InitialClusterToken, "initial-cluster-token", "coordtest", "cluster token")
	flag.UintVar(&cfg.TickMs, "heartbeat-interval", 100, "ms")
	flag.UintVar(&cfg.ElectionMs, "election-timeout", 1000, "ms")
	flag.StringVar(&cfg.LogLevel, "log-level", "error", "log level")
	flag.StringVar(&cfg.AutoCompactionRetention, "auto-compaction-retention", "0", "retention")
	authToken := flag.String("auth-token", "", "auth token type (simple or jwt,...)")
	flag.UintVar(&cfg.AuthTokenTTL, "auth-token-ttl", cfg.AuthTokenTTL, "lifetime in seconds of a simple auth token")
	flag.Parse()
	if *authToken != "" {
		cfg.AuthToken = *authToken
	}
	cu, err := url.Parse(client)
	if err != nil {
		log.Fatal(err)
	}
	pu, err := url.Parse(peer)
	if err != nil {
		log.Fatal(err)
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatal(err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-e.Server.ReadyNotify():
		os.Stdout.WriteString("ready\n")
	case err := <-e.Err():
		log.Fatal(err)
	case <-sig:
		e.Close()
		return
	}
	select {
	case err := <-e.Err():
		log.Fatal(err)
	case <-sig:
		e.Close()
	}
}
