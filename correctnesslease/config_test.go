package correctnesslease

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestConfigValidation(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx := context.Background()
	cases := []struct {
		name string
		cfg  Config
		want error
	}{
		{"no tenant", Config{}, coord.ErrInvalidName},
		{"tenant with slash", Config{Tenant: "a/b"}, coord.ErrInvalidName},
		{"tenant invalid utf8", Config{Tenant: "a\xff"}, coord.ErrInvalidName},
		{"ttl too short", Config{Tenant: "a", TTL: time.Second}, ErrInvalidConfig},
		{"ttl too long", Config{Tenant: "a", TTL: time.Hour}, ErrInvalidConfig},
		{"ttl negative", Config{Tenant: "a", TTL: -time.Second}, ErrInvalidConfig},
		{"keepalive timeout = ttl/3", Config{Tenant: "a", TTL: 3 * time.Second, KeepaliveTimeout: time.Second}, ErrInvalidConfig},
		{"keepalive timeout > ttl/3", Config{Tenant: "a", KeepaliveTimeout: 6 * time.Second}, ErrInvalidConfig},
		{"keepalive timeout negative", Config{Tenant: "a", KeepaliveTimeout: -1}, ErrInvalidConfig},
		{"max lease labels negative", Config{Tenant: "a", MaxLeaseLabels: -1}, ErrInvalidConfig},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewSession(ctx, cli, c.cfg)
			if !errors.Is(err, c.want) {
				t.Fatalf("NewSession(%+v) = %v, %v; want %v", c.cfg, s, err, c.want)
			}
			var ce *ConfigError
			var ne *coord.NameError
			if !errors.As(err, &ce) && !errors.As(err, &ne) {
				t.Fatalf("error %T is neither *ConfigError nor *coord.NameError", err)
			}
		})
	}
	if _, err := NewSession(ctx, nil, Config{Tenant: "a"}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("nil client: %v", err)
	}
	// Nothing was granted by the failed constructions.
	leases, err := cli.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Leases) != 0 {
		t.Fatalf("failed NewSession left %d leases", len(leases.Leases))
	}

	// Defaults.
	cfg := Config{Tenant: "a"}.withDefaults()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.TTL != 15*time.Second || cfg.KeepaliveTimeout != 15*time.Second/6 || cfg.Clock == nil ||
		cfg.Logger == nil || cfg.MeterProvider == nil || cfg.TracerProvider == nil {
		t.Fatalf("defaults: %+v", cfg)
	}
}

func TestInvalidNames(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	s := newSession(t, cli, Config{Tenant: coordtest.Tenant(t), TTL: 3 * time.Second})
	ctx := context.Background()
	for _, name := range []string{"", "a/b", "..", "a b", "x\x00", "\xff\xfe", strings.Repeat("n", coord.MaxNameLen+1)} {
		if _, err := Acquire(ctx, s, name); !errors.Is(err, coord.ErrInvalidName) {
			t.Errorf("Acquire(%q) = %v, want ErrInvalidName", name, err)
		}
		if _, err := TryAcquire(ctx, s, name); !errors.Is(err, coord.ErrInvalidName) {
			t.Errorf("TryAcquire(%q) = %v, want ErrInvalidName", name, err)
		}
		if _, err := Observe(ctx, cli, s.cfg.Tenant, name); !errors.Is(err, coord.ErrInvalidName) {
			t.Errorf("Observe(%q) = %v, want ErrInvalidName", name, err)
		}
		if err := Run(ctx, s, name, func(context.Context, coord.Token) error { return nil }, nil); !errors.Is(err, coord.ErrInvalidName) {
			t.Errorf("Run(%q) = %v, want ErrInvalidName", name, err)
		}
	}
	// Nothing was written under the tenant by the rejected calls.
	resp, err := cli.Get(ctx, "/tenants/"+s.cfg.Tenant+"/elections/", clientv3WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Fatalf("rejected names left %d keys", resp.Count)
	}
	// A cancelled context is refused before any RPC.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Acquire(cctx, s, "ok"); !errors.Is(err, context.Canceled) || !errors.Is(err, coord.ErrAuthorityLost) {
		t.Fatalf("Acquire with cancelled ctx: %v", err)
	}
}
