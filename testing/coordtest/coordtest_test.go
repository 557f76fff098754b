package coordtest

import (
	"context"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
)

func TestEtcdPutGet(t *testing.T) {
	cli := Etcd(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/tenants/t/config/k", "v1"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "/tenants/t/config/k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v1" {
		t.Fatalf("got %v", resp.Kvs)
	}
}

// TestEtcdClusterSurvivesMemberLoss: a 3-member cluster of real etcd processes
// keeps accepting writes with one member killed, and takes it back on restart.
func TestEtcdClusterSurvivesMemberLoss(t *testing.T) {
	c := EtcdCluster(t, 3, nil)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "before"); err != nil {
		t.Fatal(err)
	}
	leader := c.Leader(ctx, cli)
	if leader < 0 {
		t.Fatal("no leader")
	}
	c.Members[leader].Kill() // the hardest member to lose
	if got := c.Members[leader].Stats().Kills; got != 1 {
		t.Fatalf("kills = %d", got)
	}
	// The survivors elect a new leader within a few election timeouts; a put sent
	// meanwhile may time out, so retry it (a put of the same value is idempotent).
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Put(pctx, "k", "during")
		pcancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("write with one member down: %v", err)
		}
	}
	c.RestartMember(t, leader)
	m := NewEtcdClient(t, c.Members[leader].ClientURL)
	for {
		resp, err := m.Get(ctx, "k")
		if err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "during" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("restarted member never caught up: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestPostgresIsolatedSchemas(t *testing.T) {
	a, b := Postgres(t), Postgres(t)
	ctx := context.Background()
	if a.Schema == b.Schema {
		t.Fatal("schemas shared")
	}
	for _, db := range []*PostgresDB{a, b} {
		if _, err := db.Pool.Exec(ctx, "CREATE TABLE t (v text)"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Pool.Exec(ctx, "INSERT INTO t VALUES ('a')"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.Pool.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 0 {
		t.Fatalf("b sees %d rows of a (%v)", n, err)
	}
}

func TestRedisNamespace(t *testing.T) {
	r := Redis(t)
	ctx := context.Background()
	key := "/tenants/" + r.Tenant + "/locks/x"
	if err := r.Client.Set(ctx, key, "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if got := r.Client.Get(ctx, key).Val(); got != "v" {
		t.Fatalf("got %q", got)
	}
}

func TestPrivateRedisRestartsEmpty(t *testing.T) {
	s := PrivateRedis(t)
	c := s.Client(t)
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.RestartEmpty(t)
	if n := c.Exists(ctx, "k").Val(); n != 0 {
		t.Fatalf("key survived a restart without persistence")
	}
	if st := s.Stats(); st.Kills != 1 || st.Starts != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestPrivatePostgresCrashRestart(t *testing.T) {
	s := PrivatePostgres(t)
	db := PostgresAt(t, s.URL)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, "CREATE TABLE t (v int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	s.RestartCrash(t)
	db.Pool.Reset() // its connections died with the server
	var v int
	if err := db.Pool.QueryRow(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != 1 {
		t.Fatalf("after crash restart: %d %v", v, err)
	}
	if s.Stats().Kills != 1 {
		t.Fatal("no crash happened")
	}
}

func TestFakeClock(t *testing.T) {
	start := time.Unix(1000, 0)
	c := NewFakeClock(start)
	t1 := c.NewTimer(time.Second)
	t2 := c.NewTimer(3 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.WaitTimers(ctx, 2); err != nil {
		t.Fatal(err)
	}
	c.Advance(999 * time.Millisecond)
	select {
	case <-t1.C():
		t.Fatal("fired early")
	default:
	}
	c.Advance(time.Millisecond)
	if got := Recv(t, t1.C(), time.Second, "the fake timer firing at its deadline"); !got.Equal(start.Add(time.Second)) {
		t.Fatalf("fired at %v", got)
	}
	if !t2.Stop() || t2.Stop() {
		t.Fatal("Stop results")
	}
	c.Advance(time.Hour)
	select {
	case <-t2.C():
		t.Fatal("stopped timer fired")
	default:
	}
	t2.Reset(time.Second)
	c.Advance(time.Second)
	Recv(t, t2.C(), time.Second, "the reset fake timer firing")
	if got := c.Now(); !got.Equal(start.Add(time.Hour + 2*time.Second)) {
		t.Fatalf("now = %v", got)
	}
}

// TestTimersDiscardAStaleTickLikeGoTimers holds coord.Timer's one rule for both
// clocks: a tick that fired but was not received is never received after Stop or
// Reset returns (Go's timers since Go 1.23). Before the rule held for the fake
// clock, a loop that Reset a timer after its tick had fired unseen read the stale
// tick at once (correctnesslease's renewal loop stepped down on it).
func TestTimersDiscardAStaleTickLikeGoTimers(t *testing.T) {
	fake := NewFakeClock(time.Unix(1000, 0))
	for _, tc := range []struct {
		name  string
		clock coord.Clock
		fire  func(coord.Timer)
	}{
		{"fake", fake, func(coord.Timer) { fake.Advance(time.Second) }},
		{"system", coord.SystemClock(), func(coord.Timer) { time.Sleep(20 * time.Millisecond) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := time.Millisecond
			if tc.name == "fake" {
				d = time.Second
			}
			for _, verb := range []string{"Reset", "Stop"} {
				tm := tc.clock.NewTimer(d)
				tc.fire(tm) // fires; nobody receives
				if verb == "Reset" {
					tm.Reset(time.Hour)
				} else {
					tm.Stop()
				}
				select {
				case v := <-tm.C():
					t.Fatalf("%s: a stale tick (%v) was received after %s returned", tc.name, v, verb)
				case <-time.After(50 * time.Millisecond):
				}
				tm.Stop()
			}
		})
	}
}
