package fencetest

import (
	"cmp"
	"context"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
)

// Resource is the fenced resource under test, reduced to two methods. Both must be
// safe for concurrent use.
type Resource interface {
	// Write stores value under key on behalf of the holder of tok. It returns nil
	// when the resource accepted the write, an error matching coord.ErrStaleToken
	// when it refused tok because it has seen a newer token, and any other error
	// for failures (which fail the check).
	Write(ctx context.Context, tok coord.Token, key, value string) error
	// Read returns the value last accepted under key, with ok false when nothing
	// was ever written under it.
	Read(ctx context.Context, key string) (value string, ok bool, err error)
}

// Defaults of Config.
const (
	DefaultTenant             = "fencetest"
	DefaultWriters            = 4
	DefaultWritesPerWriter    = 25
	DefaultTokens             = 6
	DefaultTTL                = correctnesslease.MinTTL
	DefaultPausedHolderTrials = 1
	DefaultTimeout            = 60 * time.Second
)

// Config tunes the kit. Only Endpoints is required.
type Config struct {
	// Endpoints of the etcd cluster that mints the tokens. Required.
	Endpoints []string
	// Tenant under which the kit's leases live. Default DefaultTenant.
	Tenant string
	// Writers is the number of concurrent writers in ConcurrentWritersNeverRegress.
	// Default DefaultWriters (4).
	Writers int
	// WritesPerWriter in ConcurrentWritersNeverRegress. Default
	// DefaultWritesPerWriter (25).
	WritesPerWriter int
	// Tokens is how many successive leases mint the tokens the concurrent writers
	// interleave; at least 2. Default DefaultTokens (6).
	Tokens int
	// TTL of the paused holder's session. Default DefaultTTL
	// (correctnesslease.MinTTL, 2 s): each PausedHolder trial lasts about one TTL.
	TTL time.Duration
	// PausedHolderTrials is how many times the paused-holder scenario runs.
	// Default DefaultPausedHolderTrials (1).
	PausedHolderTrials int
	// Timeout bounds each check. Default DefaultTimeout (60 s).
	Timeout time.Duration
}

func (c Config) withDefaults() Config {
	c.Tenant = cmp.Or(c.Tenant, DefaultTenant)
	c.Writers = cmp.Or(c.Writers, DefaultWriters)
	c.WritesPerWriter = cmp.Or(c.WritesPerWriter, DefaultWritesPerWriter)
	c.Tokens = cmp.Or(c.Tokens, DefaultTokens)
	c.TTL = cmp.Or(c.TTL, DefaultTTL)
	c.PausedHolderTrials = cmp.Or(c.PausedHolderTrials, DefaultPausedHolderTrials)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	return c
}

// validate checks a Config after withDefaults. Errors are *ConfigError.
func (c Config) validate() error {
	bad := func(field, reason string) error { return &ConfigError{Field: field, Reason: reason} }
	switch {
	case len(c.Endpoints) == 0:
		return bad("Endpoints", "required (e.g. coordtest.Etcd(t).Endpoints)")
	case c.Writers < 1:
		return bad("Writers", "below 1")
	case c.WritesPerWriter < 1:
		return bad("WritesPerWriter", "below 1")
	case c.Tokens < 2:
		return bad("Tokens", "below 2")
	case c.TTL < 0:
		return bad("TTL", "negative")
	case c.PausedHolderTrials < 1:
		return bad("PausedHolderTrials", "below 1")
	case c.Timeout < 0:
		return bad("Timeout", "negative")
	}
	return nil
}

// Run runs every check against r as subtests of t. It blocks until they finish
// (about one TTL per paused-holder trial plus a few seconds) and fails t, never
// skips, when r does not fence or etcd is unreachable.
func Run(t *testing.T, r Resource, cfg Config) {
	t.Helper()
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	k := newKit(t, cfg)
	t.Run("StaleTokenRejected", func(t *testing.T) { k.check(t, r, checkStale) })
	t.Run("EqualTokenAccepted", func(t *testing.T) { k.check(t, r, checkEqual) })
	t.Run("NewerTokenAccepted", func(t *testing.T) { k.check(t, r, checkNewer) })
	t.Run("ConcurrentWritersNeverRegress", func(t *testing.T) { k.check(t, r, checkConcurrent) })
	t.Run("PausedHolder", func(t *testing.T) {
		for i := 0; i < cfg.PausedHolderTrials; i++ {
			k.check(t, r, checkPausedHolder)
		}
	})
}

// check runs one check with a fresh lease name and key and fails t on its error.
func (k *kit) check(t *testing.T, r Resource, fn func(ctx context.Context, k *kit, r Resource, name string) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), k.cfg.Timeout)
	defer cancel()
	if err := fn(ctx, k, r, k.uniqueName(t)); err != nil {
		t.Fatal(err)
	}
}
