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
}

// EtcdCluster starts an n-member etcd cluster as child processes on free loopback
// ports (the binary from COORD_TEST_ETCD_BIN, or built from this module), waits
// until every member is ready (at most 60 s) and kills them when the test ends.
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
	c := &EtcdClusterServer{}
	var initial []string
	for i := 0; i < n; i++ {
		m := &EtcdMember{
			Name:      fmt.Sprintf("m%d", i),
			ClientURL: loopbackURL(FreePort(t)),
			PeerURL:   loopbackURL(FreePort(t)),
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
		m.WaitOutput(t, "ready", 60*time.Second)
	}
	return c
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
	m := c.Members[i]
	m.Kill()
	if err := m.Start(); err != nil {
		t.Fatalf("coordtest: restart %s: %v", m.Name, err)
	}
	m.WaitOutput(t, "ready", 60*time.Second)
}
