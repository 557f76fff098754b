package ownership_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestBadInput: invalid names (empty, '/', NUL, invalid UTF-8, too long), P
// outside [1, MaxPartitions], a negative drain, a nil client or session, a
// session of another tenant, invalid metadata, a cancelled context, a Partitions
// count that differs from the group's, and a second Join on one session are
// refused with typed errors, and leave nothing behind.
func TestBadInput(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	tenant := coordtest.Tenant(t)
	ok := ownership.Config{Tenant: tenant, Group: "orders", Partitions: 4, Logger: coordtest.Logger(t)}
	with := func(f func(*ownership.Config)) ownership.Config { c := ok; f(&c); return c }
	for _, tc := range []struct {
		name   string
		cfg    ownership.Config
		isName bool // an invalid name: unwraps to *coord.NameError
	}{
		{"empty tenant", with(func(c *ownership.Config) { c.Tenant = "" }), true},
		{"empty group", with(func(c *ownership.Config) { c.Group = "" }), true},
		{"slash in group", with(func(c *ownership.Config) { c.Group = "a/b" }), true},
		{"NUL in group", with(func(c *ownership.Config) { c.Group = "a\x00b" }), true},
		{"invalid UTF-8 group", with(func(c *ownership.Config) { c.Group = "a\xffb" }), true},
		{"space in group", with(func(c *ownership.Config) { c.Group = "a b" }), true},
		{"long group", with(func(c *ownership.Config) { c.Group = strings.Repeat("g", ownership.MaxGroupLen+1) }), true},
		{"P=0", with(func(c *ownership.Config) { c.Partitions = 0 }), false},
		{"P negative", with(func(c *ownership.Config) { c.Partitions = -1 }), false},
		{"P too large", with(func(c *ownership.Config) { c.Partitions = ownership.MaxPartitions + 1 }), false},
		{"negative drain", with(func(c *ownership.Config) { c.DrainTimeout = -time.Second }), false},
		{"negative MaxAcquiring", with(func(c *ownership.Config) { c.MaxAcquiring = -1 }), false},
		{"MaxAcquiring too large", with(func(c *ownership.Config) { c.MaxAcquiring = ownership.MaxMaxAcquiring + 1 }), false},
	} {
		_, err := ownership.New(cli, tc.cfg)
		var ce *ownership.ConfigError
		if !errors.Is(err, ownership.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field == "" {
			t.Errorf("%s: %v, want a *ConfigError", tc.name, err)
		}
		if tc.isName && !errors.Is(err, coord.ErrInvalidName) {
			t.Errorf("%s: %v does not match coord.ErrInvalidName", tc.name, err)
		}
	}
	if _, err := ownership.New(nil, ok); !errors.Is(err, ownership.ErrInvalidConfig) {
		t.Errorf("nil client: %v", err)
	}
	long := with(func(c *ownership.Config) {
		c.Group = strings.Repeat("g", ownership.MaxGroupLen)
		c.Partitions = ownership.MaxPartitions
	})
	if _, err := ownership.New(cli, long); err != nil {
		t.Errorf("longest group with MaxPartitions: %v", err)
	}
	if _, err := coord.Key(tenant, coord.KindElections, ownership.LeaseName(long.Group, ownership.MaxPartitions-1)); err != nil {
		t.Errorf("the longest lease name is not a valid key: %v", err)
	}

	g, err := ownership.New(cli, ok)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := newSession(t, cli, tenant)
	if _, err := g.Join(ctx, nil, nil); !errors.Is(err, ownership.ErrInvalidConfig) {
		t.Errorf("nil session: %v", err)
	}
	if _, err := g.Join(ctx, newSession(t, cli, tenant+"-other"), nil); !errors.Is(err, ownership.ErrInvalidConfig) {
		t.Errorf("session of another tenant: %v", err)
	}
	if _, err := g.Join(ctx, s, map[string]string{"k": "a\x00"}); !errors.Is(err, ownership.ErrInvalidConfig) {
		t.Errorf("NUL in metadata: %v", err)
	}
	cancelled, cancel := context.WithCancelCause(ctx)
	why := errors.New("caller gave up")
	cancel(why)
	if _, err := g.Join(cancelled, s, nil); !errors.Is(err, why) {
		t.Errorf("cancelled context: %v, want its cause", err)
	}
	if n := keys(t, cli, "/tenants/"+tenant+"/members/ownership."); n != 0 {
		t.Fatalf("refused Joins left %d member keys", n)
	}

	m, err := g.Join(ctx, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := g.Join(ctx, s, nil); !errors.Is(err, ownership.ErrAlreadyJoined) {
		t.Errorf("second Join on one session: %v", err)
	}
	coordtest.Until(t, 10*time.Second, 10*time.Millisecond, "the first member writes the target", func() bool {
		snap, err := ownership.GroupGet(ctx, cli, tenant, "orders")
		return err == nil && snap.Partitions == 4
	})
	g8, err := ownership.New(cli, with(func(c *ownership.Config) { c.Partitions = 8 }))
	if err != nil {
		t.Fatal(err)
	}
	var ce *ownership.ConfigError
	if _, err := g8.Join(ctx, newSession(t, cli, tenant), nil); !errors.As(err, &ce) || ce.Field != "Partitions" {
		t.Errorf("mismatched P: %v, want a *ConfigError for Partitions", err)
	}
	if n := keys(t, cli, "/tenants/"+tenant+"/members/ownership."); n != 1 {
		t.Fatalf("%d member keys after a refused Join, want 1", n)
	}
	closed := newSession(t, cli, tenant)
	if err := closed.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Join(ctx, closed, nil); !errors.Is(err, ownership.ErrClosed) {
		t.Errorf("closed session: %v", err)
	}
	if _, err := ownership.GroupGet(ctx, cli, tenant, "a/b"); !errors.Is(err, coord.ErrInvalidName) {
		t.Errorf("Snapshot of an invalid group: %v", err)
	}
	if _, err := ownership.Observe(ctx, cli, "", "orders"); !errors.Is(err, coord.ErrInvalidName) {
		t.Errorf("Observe of an invalid tenant: %v", err)
	}
}
