package coordtest

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

const grpcProxyBinPkg = "github.com/coordkit/coordkit/testing/coordtest/internal/grpcproxybin"

// GRPCProxyServer is etcd's own grpc-proxy (`etcd grpc-proxy start`, built from
// go.etcd.io/etcd/server/v3/etcdmain at the client's version) running as a child
// process in front of an etcd cluster: the access layer that coalesces identical
// watches of many clients into one upstream watch. Its faults are the Process's.
type GRPCProxyServer struct {
	*Process
	// URL is the proxy's client endpoint, http://127.0.0.1:port: point clients
	// at it. Its /metrics relays an etcd member's; the proxy's own metrics
	// (etcd_grpc_proxy_*) are at MetricsURL.
	URL string
	// MetricsURL is URL + "/proxy/metrics".
	MetricsURL string
	// Namespace is the prefix the proxy adds to every key (--namespace), or "".
	Namespace string
}

// GRPCProxyOpts tune a proxy. A nil *GRPCProxyOpts takes the defaults.
type GRPCProxyOpts struct {
	// Namespace makes the proxy prefix every key its clients use (--namespace):
	// one proxy per tenant, its clients confined to the tenant's keys.
	Namespace string
	// Port chooses the proxy's port on 127.0.0.1. Default: a free one.
	Port int
}

// proxyReadyTimeout bounds how long the proxy may take to start serving.
const proxyReadyTimeout = 60 * time.Second

// GRPCProxy starts etcd's grpc-proxy in front of endpoints (client URLs of etcd
// members) as a child process on a loopback port, waits until it serves (at most
// 60 s) and kills it when the test ends. The binary comes from
// COORD_TEST_ETCD_PROXY_BIN (an etcd server binary: it is run as
// `etcd grpc-proxy start`), or is built on first use in the test binary from
// this module's internal/grpcproxybin, which is etcd's own main.
func GRPCProxy(t testing.TB, endpoints []string, opts *GRPCProxyOpts) *GRPCProxyServer {
	t.Helper()
	if opts == nil {
		opts = &GRPCProxyOpts{}
	}
	if len(endpoints) == 0 {
		t.Fatal("coordtest: GRPCProxy: no etcd endpoint")
	}
	bin := os.Getenv("COORD_TEST_ETCD_PROXY_BIN")
	if bin == "" {
		bin = Build(t, grpcProxyBinPkg)
	}
	port := opts.Port
	if port == 0 {
		port = FreePort(t)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	hosts := make([]string, len(endpoints))
	for i, ep := range endpoints {
		hosts[i] = strings.TrimPrefix(strings.TrimPrefix(ep, "http://"), "https://")
	}
	args := []string{"grpc-proxy", "start",
		"--endpoints", strings.Join(hosts, ","),
		"--listen-addr", addr,
		// The proxy checks its own health through a client of this address.
		"--advertise-client-url", addr,
		"--data-dir", t.TempDir(),
	}
	if opts.Namespace != "" {
		args = append(args, "--namespace", opts.Namespace)
	}
	s := &GRPCProxyServer{URL: "http://" + addr, MetricsURL: "http://" + addr + "/proxy/metrics", Namespace: opts.Namespace}
	s.Process = StartProcess(t, "grpc-proxy "+addr, bin, args...)
	s.WaitOutput(t, "started gRPC proxy", proxyReadyTimeout)
	return s
}

// Client returns a client of the proxy, closed when the test ends.
func (s *GRPCProxyServer) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return NewEtcdClient(t, s.URL)
}

// EtcdMetric returns the sum of every sample of the Prometheus metric name (all
// label sets; a histogram's name_count or name_sum names one series) that the
// etcd member at endpoint exports on /metrics (or the page at endpoint when it
// ends in "metrics", as a proxy's MetricsURL does), and whether any sample
// was found. It is how a test reads etcd's own figures: watchers
// (etcd_debugging_mvcc_watcher_total), leader changes
// (etcd_server_leader_changes_seen_total), the proxy's coalesced watchers
// (etcd_grpc_proxy_watchers_coalescing_total).
func EtcdMetric(endpoint, name string) (float64, bool, error) {
	samples, err := EtcdMetrics(endpoint, name)
	if err != nil {
		return 0, false, err
	}
	var sum float64
	for _, s := range samples {
		sum += s.Value
	}
	return sum, len(samples) > 0, nil
}

// MetricSample is one sample of a Prometheus metric: its labels as written
// ({a="x",b="y"}, or "" for none) and its value.
type MetricSample struct {
	Labels string
	Value  float64
}

// EtcdMetrics returns every sample of the Prometheus metric name that endpoint
// exports on /metrics, or on the page at endpoint when it ends in "metrics"
// (name exactly: a histogram's buckets are name_bucket). It waits at most 5 s
// for the answer.
func EtcdMetrics(endpoint, name string) ([]MetricSample, error) {
	c := http.Client{Timeout: 5 * time.Second}
	page := endpoint
	if !strings.HasSuffix(page, "metrics") {
		page = strings.TrimSuffix(page, "/") + "/metrics"
	}
	resp, err := c.Get(page)
	if err != nil {
		return nil, fmt.Errorf("coordtest: metrics of %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("coordtest: metrics of %s: %s", endpoint, resp.Status)
	}
	var out []MetricSample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		labels := ""
		if rest[0] == '{' {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			labels, rest = rest[:end+1], rest[end+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("coordtest: metrics of %s: %q: %w", endpoint, line, err)
		}
		out = append(out, MetricSample{Labels: labels, Value: v})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("coordtest: metrics of %s: %w", endpoint, err)
	}
	return out, nil
}
