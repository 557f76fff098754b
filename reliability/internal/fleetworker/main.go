// Command fleetworker is one client process of the fleet scenario
// (reliability/fleet_test.go) and of the grpc-proxy lane: on one etcd client it
// runs a realistic mix — caches of config keys, watchers of a service registry,
// registrations, held leases, an ownership member — written either with
// coordkit (-mode ours: failstatic, membership, correctnesslease, ownership, all
// on the client's shared watch plane) or the way teams do today (-mode peer:
// plain clientv3 watches, etcd's concurrency package and naming/endpoints).
//
// What every subscriber is given goes to the log file (-log), one line each,
// with wall-clock nanoseconds (the parent runs on the same host):
//
//	R <sub> <key|prefix> <range>                    a subscriber and what it follows
//	S <sub> <ns> <rev> <state> <changes>            a state delivered to it
//	M <ns> <opens> <relists> <resyncs> <upstream> <subs>   the plane's counters (ours)
//	W <ns> <creates> <cancels> <progress> <ranges>  what the client sent etcd: watch
//	                                                creates, cancels, progress requests
//	                                                (on Watch streams) and Range calls
//	L <ns> held|lost                                the leases' session held (every lease
//	                                                acquired, the member joined) or lost
//	E <ns> <message>                                an error the worker saw
//
// A cache's state is the ModRevision of its key (0: absent) and its changes the
// key@modrev (key@modrev! for a delete) it was told of; a registry watcher's
// state is n:hash of its members' instance=addr lines (see fleethash.State) and its
// rev -1 where the API gives none (naming/endpoints). On stdout it prints
// "READY <subscriptions> <upstream watches>" once everything is set up, and
// "END <leases held>/<leases> <partitions owned> <registrations registered>/<registrations> <sessions lost>"
// after a SIGTERM, when the log is flushed; then it exits. A lost session is
// started again, its leases re-acquired and its member joined again, as a
// service's main loop does.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// mix is the workload of one process.
type mix struct {
	mode, tenant, name      string
	caches, keys, watchers  int
	regs, leases, partition int
	ttl                     time.Duration
}

func main() { os.Exit(run()) }

func run() int {
	var m mix
	etcd := flag.String("etcd", "", "comma-separated etcd endpoints")
	logPath := flag.String("log", "", "observation log file")
	flag.StringVar(&m.mode, "mode", "ours", "ours or peer")
	flag.StringVar(&m.tenant, "tenant", "fleet", "tenant")
	flag.StringVar(&m.name, "name", "p0", "this process's name")
	flag.IntVar(&m.caches, "caches", 60, "config caches")
	flag.IntVar(&m.keys, "keys", 8, "distinct config keys the caches follow")
	flag.IntVar(&m.watchers, "watchers", 10, "registry watchers of service api")
	flag.IntVar(&m.regs, "regs", 10, "registrations of service api")
	flag.IntVar(&m.leases, "leases", 20, "leases held")
	flag.IntVar(&m.partition, "partitions", 20, "partitions of the ownership group (0: no member)")
	flag.DurationVar(&m.ttl, "ttl", 15*time.Second, "TTL of sessions and registrations")
	flag.Parse()

	lg, err := openLog(*logPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetworker:", err)
		return 2
	}
	var sent rpcCounter
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: strings.Split(*etcd, ","), DialTimeout: 2 * time.Second,
		DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainStreamInterceptor(sent.stream), grpc.WithChainUnaryInterceptor(sent.unary)},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetworker:", err)
		return 2
	}
	defer cli.Close()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go sent.sample(ctx, lg)

	var w worker
	if m.mode == "peer" {
		w, err = startPeer(ctx, cli, m, lg)
	} else {
		w, err = startOurs(ctx, cli, m, lg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetworker:", err)
		lg.close()
		return 2
	}
	subs, upstream := w.counts()
	fmt.Printf("READY %d %d\n", subs, upstream)
	<-term
	held, leases, owned, registered, regs, losses := w.end()
	cancel()
	lg.close() // a sampler's line after it is dropped
	fmt.Printf("END %d/%d %d %d/%d %d\n", held, leases, owned, registered, regs, losses)
	return 0
}

// worker is one mode's running mix.
type worker interface {
	// counts returns the subscriptions held and the upstream watches they
	// cost this process (as the process knows them).
	counts() (subs, upstream int)
	// end reports the leases still held, partitions owned, registrations
	// registered and sessions lost.
	end() (held, leases, owned, registered, regs, losses int)
}

// cacheKey is the config key cache i follows.
func (m mix) cacheKey(i int) string {
	return fmt.Sprintf("/tenants/%s/config/k%d", m.tenant, i%m.keys)
}

// addr is registration i's address: unique in the fleet.
func (m mix) addr(i int) string { return fmt.Sprintf("%s-%d.fleet:80", m.name, i) }
