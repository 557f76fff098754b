package failstatic_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestLiveSnapshotFollowsEtcd(t *testing.T) {
	_, cli, prefix := etcdPrefix(t)
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
	cli := coordtest.Etcd(t).Client(t)
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
	_, cli, prefix := etcdPrefix(t)
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
	_, cli, prefix := etcdPrefix(t)
	put(t, cli, prefix+"a", "INVALID")
	cfg := baseConfig(prefix)
	cfg.InitialTimeout = 500 * time.Millisecond
	_, err := failstatic.New(context.Background(), cli, cfg)
	if !errors.Is(err, failstatic.ErrNoSnapshot) || !errors.Is(err, failstatic.ErrRejected) {
		t.Fatalf("New over invalid config: %v, want ErrNoSnapshot+ErrRejected", err)
	}
}

func TestGetIsAllocationFree(t *testing.T) {
	_, cli, prefix := etcdPrefix(t)
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
	cli := coordtest.Etcd(t).Client(t)
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

// A Prefix under /tenants/ must name one whole tenant: "/tenants/t1" would also
// watch tenant t10.
func TestPrefixMustNameOneTenant(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	put(t, cli, "/tenants/t10/config/secret", "t10's")
	for _, p := range []string{"/tenants/t1", "/tenants/", "/tenants", "/ten", "/", "/tenants/t1 /config/"} {
		cfg := baseConfig(p)
		cfg.InitialTimeout = time.Second
		c, err := failstatic.New(context.Background(), cli, cfg)
		var ce *failstatic.ConfigError
		if err == nil {
			leak := c.Get().Value["/tenants/t10/config/secret"]
			c.Close()
			t.Errorf("Prefix %q accepted (serving %q)", p, leak)
			continue
		}
		if !errors.As(err, &ce) || ce.Field != "Prefix" || !errors.Is(err, failstatic.ErrInvalidConfig) {
			t.Errorf("Prefix %q: %v, want a *ConfigError for Prefix", p, err)
		}
	}
	for _, p := range []string{"/tenants/t1/", "/tenants/t1/config/", "/tenants/t1/config/feature-", "/platform/flags"} {
		cfg := baseConfig(p)
		cfg.InitialTimeout = 5 * time.Second
		c, err := failstatic.New(context.Background(), cli, cfg)
		if err != nil {
			t.Errorf("Prefix %q: %v, want it accepted", p, err)
			continue
		}
		if v, ok := c.Get().Value["/tenants/t10/config/secret"]; ok {
			t.Errorf("Prefix %q serves t10's key %q", p, v)
		}
		c.Close()
	}
}
