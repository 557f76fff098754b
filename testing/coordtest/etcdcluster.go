package coordtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

const etcdBinPkg = "github.com/coordkit/coordkit/testing/coordtest/internal/etcdbin"

// EtcdMember is one etcd member of a Cluster, running as a child process.
type EtcdMember struct {
	*Process
	Name      string
	ClientURL string
	PeerURL   string
}

// EtcdClusterServer is a cluster of etcd members running as separate processes, so
// a test can pause (SIGSTOP), kill and restart them.
type EtcdClusterServer struct {
	Members []*EtcdMember
}

// EtcdClusterOpts tune a cluster. A nil *EtcdClusterOpts takes the defaults.
type EtcdClusterOpts struct {
	HeartbeatMs uint   // default 100
	ElectionMs  uint   // default 1000
	AuthToken   string // etcd --auth-token, e.g. "simple" or "jwt,..."; default etcd's
	AuthTTL     uint   // etcd --auth-token-ttl in seconds (simple tokens); default etcd's (300)
	// ClientPorts and PeerPorts choose member i's client and peer port on
	// 127.0.0.1 (a port a proxy or a firewall rule was set up for). Default, and
	// for a 0 or a missing entry: a free port. At most one entry per member.
	ClientPorts, PeerPorts []int
}

// memberReadyTimeout bounds how long a member may take to print "ready".
const memberReadyTimeout = 60 * time.Second

// ports returns the client and peer port of each of n members (0: pick a free one).
func (o *EtcdClusterOpts) ports(n int) (client, peer []int, err error) {
	pick := func(name string, given []int) ([]int, error) {
		if len(given) > n {
			return nil, fmt.Errorf("%d %s for %d members", len(given), name, n)
		}
		out := make([]int, n)
		for i, p := range given {
			if p < 0 || p > 65535 {
				return nil, fmt.Errorf("%s[%d] = %d is not a port", name, i, p)
			}
			out[i] = p
		}
		return out, nil
	}
	if client, err = pick("ClientPorts", o.ClientPorts); err != nil {
		return nil, nil, err
	}
	peer, err = pick("PeerPorts", o.PeerPorts)
	return client, peer, err
}

// EtcdCluster starts an n-member etcd cluster as child processes on loopback
// ports (free ones, unless opts chooses them), waits until every member is ready
// (at most 60 s) and kills them when the test ends. The binary comes from
// COORD_TEST_ETCD_BIN, or is built from this module on first use in the test
// binary (announced on stderr: it takes seconds from the build cache, longer cold).
func EtcdCluster(t testing.TB, n int, opts *EtcdClusterOpts) *EtcdClusterServer {
	t.Helper()
	if opts == nil {
		opts = &EtcdClusterOpts{}
	}
	if opts.HeartbeatMs == 0 {
		opts.HeartbeatMs = 100
	}
	if opts.ElectionMs == 0 {
		opts.ElectionMs = 1000
	}
	bin := os.Getenv("COORD_TEST_ETCD_BIN")
	if bin == "" {
		bin = Build(t, etcdBinPkg)
	}
	clientPorts, peerPorts, err := opts.ports(n)
	if err != nil {
		t.Fatalf("coordtest: EtcdCluster: %v", err)
	}
	c := &EtcdClusterServer{}
	var initial []string
	for i := 0; i < n; i++ {
		if clientPorts[i] == 0 {
			clientPorts[i] = FreePort(t)
		}
		if peerPorts[i] == 0 {
			peerPorts[i] = FreePort(t)
		}
		m := &EtcdMember{
			Name:      fmt.Sprintf("m%d", i),
			ClientURL: loopbackURL(clientPorts[i]),
			PeerURL:   loopbackURL(peerPorts[i]),
		}
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	dir := t.TempDir()
	for _, m := range c.Members {
		args := []string{
			"--name", m.Name,
			"--data-dir", filepath.Join(dir, m.Name),
			"--client-url", m.ClientURL,
			"--peer-url", m.PeerURL,
			"--initial-cluster", strings.Join(initial, ","),
			"--heartbeat-interval", fmt.Sprint(opts.HeartbeatMs),
			"--election-timeout", fmt.Sprint(opts.ElectionMs),
		}
		if opts.AuthToken != "" {
			args = append(args, "--auth-token", opts.AuthToken)
		}
		if opts.AuthTTL != 0 {
			args = append(args, "--auth-token-ttl", fmt.Sprint(opts.AuthTTL))
		}
		m.Process = StartProcess(t, "etcd "+m.Name, bin, args...)
	}
	for _, m := range c.Members {
		m.WaitOutput(t, "ready", memberReadyTimeout)
	}
	return c
}

// Start starts the member again (after Kill) on the same data directory and ports
// and, like RestartMember, returns once it is ready to serve — or an error when it
// exited or did not become ready within 60 s.
func (m *EtcdMember) Start() error {
	if err := m.Process.Start(); err != nil {
		return err
	}
	return m.Printed("ready", memberReadyTimeout)
}

// Restart kills the member and starts it again, returning once it is ready.
func (m *EtcdMember) Restart() error {
	m.Kill()
	return m.Start()
}

// Endpoints returns the client URLs of all members.
func (c *EtcdClusterServer) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

// Client returns a client of all members, closed when the test ends.
func (c *EtcdClusterServer) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return NewEtcdClient(t, c.Endpoints()...)
}

// Leader returns the index of the member that is the raft leader, asking each
// reachable member, or -1 if none answers within the context.
func (c *EtcdClusterServer) Leader(ctx context.Context, cli *clientv3.Client) int {
	for i, m := range c.Members {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := cli.Status(sctx, m.ClientURL)
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			return i
		}
	}
	return -1
}

// RestartMember kills member i and starts it again on the same data directory and
// ports (etcd rejoins from its data directory), waiting until it is ready.
func (c *EtcdClusterServer) RestartMember(t testing.TB, i int) {
	t.Helper()
	if err := c.Members[i].Restart(); err != nil {
		t.Fatalf("coordtest: restart %s: %v", c.Members[i].Name, err)
	}
}
