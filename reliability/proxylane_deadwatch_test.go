package reliability

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestGRPCProxyLaneProxyLinkCutAndCompacted: the grpc-proxy's own link to etcd
// is cut while etcd's history is compacted past the proxy's shared upstream
// watch of a prefix. When the link returns the proxy's resume is refused
// (compacted), its shared watch ends, and every client watching the range
// through it is told of the compaction — the sequence of etcd-io/etcd#21813,
// where a broadcast whose upstream watch ended stays registered and new
// watchers can join it and never hear of an event again. A failstatic cache of
// the prefix (its plane's root has the same range) must re-list once, re-open
// its watch and be current again for the next write; a plain clientv3 watcher
// that re-watches the range is checked beside it.
func TestGRPCProxyLaneProxyLinkCutAndCompacted(t *testing.T) {
	const faultLink, faultCompacted = "the grpc-proxy's link to etcd blackholed", "history compacted past the proxy's shared watch"
	res := coordtest.NewResult(t, "grpc-proxy lane: the proxy's own link to etcd cut while history is compacted past its shared watch: the cache re-lists once and is current again",
		coordtest.Faults(faultLink, faultCompacted))
	defer coordtest.Report(t, res)
	cluster := coordtest.EtcdCluster(t, 1, nil)
	up := coordtest.NewProxy(t, strings.TrimPrefix(cluster.Endpoints()[0], "http://"))
	gp := coordtest.GRPCProxy(t, []string{up.URL()}, nil)
	direct := cluster.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const prefix = "/tenants/lane/config/"
	put := func(k, v string) int64 {
		resp, err := direct.Put(ctx, prefix+k, v)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	put("a", "1")

	plain := gp.Client(t)
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	pch := plain.Watch(pctx, prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	coordtest.Recv(t, pch, 10*time.Second, "the plain watch created")

	c, err := failstatic.New(ctx, gp.Client(t), failstatic.Config[string]{Prefix: prefix, Logger: laneQuiet,
		ProbeInterval: 200 * time.Millisecond, ResetAfter: time.Second,
		Decode: func(kvs []failstatic.KV) (string, error) {
			var b strings.Builder
			for _, kv := range kvs {
				fmt.Fprintf(&b, "%s=%s,", strings.TrimPrefix(kv.Key, prefix), kv.Value)
			}
			return b.String(), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	up.Blackhole()
	var rev int64
	for i := range 5 {
		rev = put("b", fmt.Sprint(i))
	}
	if _, err := direct.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	up.Heal()
	if up.Stats().ResetAtHeal > 0 {
		res.Faults[faultLink]++
	}
	// The plain watcher is told of the compaction: the proxy's shared watch ended.
	for wr := range pch {
		if wr.CompactRevision != 0 {
			res.Faults[faultCompacted]++
			break
		}
	}
	// A plain watcher re-watches from after the compaction (a team's loop).
	pch2 := plain.Watch(pctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithCreatedNotify())
	coordtest.Recv(t, pch2, 10*time.Second, "the plain re-watch created")
	coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "the cache re-listed after the compaction", func() bool { return c.Status().Relists > 0 })

	last := put("c", "new")
	written := time.Now()
	coordtest.Until(t, 30*time.Second, 20*time.Millisecond, fmt.Sprintf("the cache given the write at revision %d", last), func() bool {
		return c.Get().Value == "a=1,b=4,c=new,"
	})
	res.Outcome["cache current after the next write ms"] = time.Since(written).Milliseconds()
	res.Outcome["cache re-lists"] = c.Status().Relists
	if n := c.Status().Relists; n != 1 {
		t.Errorf("the cache re-listed %d times for one compaction", n)
	}
	plainGot := int64(0)
	select {
	case wr := <-pch2:
		plainGot = int64(len(wr.Events))
	case <-time.After(5 * time.Second):
		t.Log("the plain re-watch was given nothing: it joined the dead shared watch (etcd-io/etcd#21813)")
	}
	res.Outcome["plain re-watch given the next write"] = plainGot
	res.Trials = 1
}
