package failstatic_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestLiveSnapshotFollowsEtcd(t *testing.T) {
	etcd := coordtest.Etcd(t)
	cli := etcd.Client(t)
	prefix := testPrefix(t)
	put(t, cli, prefix+"a", "1")
	put(t, cli, prefix+"b", "2")
	put(t, cli, prefix[:len(prefix)-1]+"x", "outside") // a sibling, not under the prefix

	c := mustNew(t, cli, baseConfig(prefix))
	s := c.Get()
	if s.Source != failstatic.SourceLive || !equalConf(s.Value, conf{prefix + "a": "1", prefix + "b": "2"}) {
		t.Fatalf("initial snapshot = %+v", s)
	}
	var rec recorder
	defer c.Subscribe(rec.fn)()

	put(t, cli, prefix+"a", "10")
	rev := put(t, cli, prefix+"c", "3")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Delete(ctx, prefix+"b"); err != nil {
		t.Fatal(err)
	}
	want, wantRev := etcdState(t, cli, prefix)
	coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "cache to follow etcd", func() bool { return equalConf(c.Get().Value, want) })
	if got := c.Get().Revision; got < rev || got > wantRev {
		t.Fatalf("revision %d, want in [%d, %d]", got, rev, wantRev)
	}
	coordtest.Until(t, 5*time.Second, 5*time.Millisecond, "subscriber to see 3 changes", func() bool { _, ch := rec.get(); return len(ch) >= 3 })
	rec.checkOrdered(t)
	_, ch := rec.get()
	if ch[0].Key != prefix+"a" || ch[1].Key != prefix+"c" || ch[2].Key != prefix+"b" || !ch[2].Deleted {
		t.Fatalf("changes = %+v", ch)
	}
	kv, err := c.Lookup(prefix + "a")
	if err != nil || string(kv.Value) != "10" {
		t.Fatalf("Lookup a = %+v, %v", kv, err)
	}
	if _, err := c.Lookup(prefix + "b"); !errors.Is(err, failstatic.ErrNotFound) {
		t.Fatalf("Lookup deleted key: %v, want ErrNotFound", err)
	}
}

func TestSingleKey(t *testing.T) {
	etcd := coordtest.Etcd(t)
	cli := etcd.Client(t)
	key := testPrefix(t) + "only"
	cfg := baseConfig("")
	cfg.Key = key
	c := mustNew(t, cli, cfg)
	if s := c.Get(); len(s.Value) != 0 || s.Source != failstatic.SourceLive {
		t.Fatalf("empty key snapshot = %+v", s)
	}
	put(t, cli, key+"-sibling", "no")
	put(t, cli, key, "yes")
	coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "key to appear", func() bool { return c.Get().Value[key] == "yes" })
	if len(c.Get().Value) != 1 {
		t.Fatalf("single-key cache picked up a sibling: %v", c.Get().Value)
	}
}

func TestRejectedSnapshotKeepsLastGood(t *testing.T) {
	etcd := coordtest.Etcd(t)
	cli := etcd.Client(t)
	prefix := testPrefix(t)
	put(t, cli, prefix+"a", "1")
	c := mustNew(t, cli, baseConfig(prefix))
	good := c.Get()

	put(t, cli, prefix+"a", "INVALID")
	coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "rejection", func() bool { return c.Status().Rejected == 1 })
	st := c.Status()
	var rej *failstatic.RejectedError
	if !errors.As(st.LastRejection, &rej) || rej.Stage != "validate" || !errors.Is(st.LastRejection, errInvalid) {
		t.Fatalf("LastRejection = %v", st.LastRejection)
	}
	if s := c.Get(); s.Revision != good.Revision || s.Value[prefix+"a"] != "1" {
		t.Fatalf("after rejection Get = %+v, want last good %+v", s, good)
	}
	// Staleness measures connectivity, not validity: still confirmed.
	coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "probe confirmation", func() bool { return c.Staleness() < 2*time.Second })

	put(t, cli, prefix+"a", "2")
	coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "valid value adopted", func() bool { return c.Get().Value[prefix+"a"] == "2" })
	if c.Status().LastRejection != nil {
		t.Fatal("LastRejection not cleared by adoption")
	}
}

func TestNewWithoutValidSnapshotFails(t *testing.T) {
	etcd := coordtest.Etcd(t)
	cli := etcd.Client(t)
	prefix := testPrefix(t)
	put(t, cli, prefix+"a", "INVALID")
	cfg := baseConfig(prefix)
	cfg.InitialTimeout = 500 * time.Millisecond
	_, err := failstatic.New(context.Background(), cli, cfg)
	if !errors.Is(err, failstatic.ErrNoSnapshot) || !errors.Is(err, failstatic.ErrRejected) {
		t.Fatalf("New over invalid config: %v, want ErrNoSnapshot+ErrRejected", err)
	}
}

func TestGetIsAllocationFree(t *testing.T) {
	etcd := coordtest.Etcd(t)
	cli := etcd.Client(t)
	prefix := testPrefix(t)
	put(t, cli, prefix+"a", "1")
	c := mustNew(t, cli, baseConfig(prefix))
	var sink failstatic.Snapshot[conf]
	if n := testing.AllocsPerRun(1000, func() { sink = c.Get() }); n != 0 {
		t.Fatalf("Get allocates %v times per call", n)
	}
	if sink.Revision == 0 {
		t.Fatal("no revision")
	}
}

func TestConfigValidation(t *testing.T) {
	etcd := coordtest.Etcd(t)
	cli := etcd.Client(t)
	ok := baseConfig("/tenants/x/config/")
	cases := map[string]func(*failstatic.Config[conf]){
		"neither key nor prefix": func(c *failstatic.Config[conf]) { c.Prefix = "" },
		"both key and prefix":    func(c *failstatic.Config[conf]) { c.Key = "/k" },
		"invalid utf8":           func(c *failstatic.Config[conf]) { c.Prefix = "/tenants/\xff/" },
		"no decode":              func(c *failstatic.Config[conf]) { c.Decode = nil },
		"negative duration":      func(c *failstatic.Config[conf]) { c.ProbeInterval = -time.Second },
		"class without max": func(c *failstatic.Config[conf]) {
			c.Classes = []failstatic.KeyClass{{Name: "r"}}
		},
		"duplicate class": func(c *failstatic.Config[conf]) {
			c.Classes = []failstatic.KeyClass{{Name: "r", MaxStaleness: 1}, {Name: "r", MaxStaleness: 1}}
		},
	}
	for name, mutate := range cases {
		cfg := ok
		mutate(&cfg)
		if _, err := failstatic.New(context.Background(), cli, cfg); !errors.Is(err, failstatic.ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := failstatic.New(context.Background(), (*clientv3.Client)(nil), ok); !errors.Is(err, failstatic.ErrInvalidConfig) {
		t.Errorf("nil client: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := failstatic.New(ctx, cli, ok); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
}

func TestStartsFromDiskWhenEtcdDown(t *testing.T) {
	etcd := coordtest.Etcd(t)
	cli := etcd.Client(t)
	prefix := testPrefix(t)
	put(t, cli, prefix+"a", "1")
	put(t, cli, prefix+"b", "2")
	cfg := baseConfig(prefix)
	cfg.StatePath = filepath.Join(t.TempDir(), "state")
	c := mustNew(t, cli, cfg)
	live := c.Get()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// A client whose only endpoint is a blackhole: etcd "down".
	proxy := coordtest.NewProxy(t, etcd.Endpoints[0][len("http://"):])
	proxy.Blackhole()
	down := coordtest.NewEtcdClient(t, proxy.URL())
	start := time.Now()
	c2 := mustNew(t, down, cfg)
	took := time.Since(start)
	s := c2.Get()
	if s.Source != failstatic.SourceDisk || s.Revision != live.Revision || !equalConf(s.Value, live.Value) {
		t.Fatalf("from disk: %+v, want %+v from disk", s, live)
	}
	t.Logf("cold start from disk with etcd blackholed took %v", took)

	// The client really tried etcd through the hole (count the fault).
	coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "bytes dropped by the blackhole", func() bool { return proxy.Stats().DroppedBytes > 0 })
	if c2.Get().Source != failstatic.SourceDisk {
		t.Fatal("went live through a blackhole")
	}
	// When etcd comes back, the cache goes live.
	proxy.Heal()
	proxy.Cut()
	put(t, cli, prefix+"c", "3")
	coordtest.Until(t, 60*time.Second, 5*time.Millisecond, "cache to go live", func() bool {
		s := c2.Get()
		return s.Source == failstatic.SourceLive && s.Value[prefix+"c"] == "3"
	})
	if st := proxy.Stats(); st.Blackholes != 1 || st.DroppedBytes == 0 {
		t.Fatalf("fault not injected: %+v", st)
	}
}

func TestCorruptStateFileIgnored(t *testing.T) {
	etcd := coordtest.Etcd(t)
	cli := etcd.Client(t)
	prefix := testPrefix(t)
	put(t, cli, prefix+"a", "1")
	cfg := baseConfig(prefix)
	cfg.StatePath = filepath.Join(t.TempDir(), "state")
	c := mustNew(t, cli, cfg)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	flipByte(t, cfg.StatePath, -1)

	// etcd up: the corrupt file is reported and the live snapshot served.
	c2 := mustNew(t, cli, cfg)
	var sfe *failstatic.StateFileError
	if err := c2.Status().StateFileError; !errors.As(err, &sfe) || sfe.Reason != "checksum" {
		t.Fatalf("StateFileError = %v, want checksum", err)
	}
	if c2.Get().Source != failstatic.SourceLive {
		t.Fatal("not live")
	}
	c2.Close() // rewrites a good file
	flipByte(t, cfg.StatePath, -1)

	// etcd down: no snapshot, and the error says why.
	proxy := coordtest.NewProxy(t, etcd.Endpoints[0][len("http://"):])
	proxy.Blackhole()
	down := coordtest.NewEtcdClient(t, proxy.URL())
	cfg.InitialTimeout = 300 * time.Millisecond
	_, err := failstatic.New(context.Background(), down, cfg)
	if !errors.Is(err, failstatic.ErrNoSnapshot) || !errors.Is(err, failstatic.ErrCorruptState) {
		t.Fatalf("New with corrupt file and etcd down: %v", err)
	}
}
