package efficiencylock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/efficiencylock"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestNewRejectsBadInput(t *testing.T) {
	t.Parallel()
	db := coordtest.Redis(t)
	for _, tc := range []struct {
		name   string
		client efficiencylock.Client
		why    efficiencylock.Reason
		cfg    efficiencylock.Config
		want   error
	}{
		{"nil client", nil, efficiencylock.DuplicatesHarmless("x"), efficiencylock.Config{}, efficiencylock.ErrInvalidConfig},
		{"empty reason", db.Client, efficiencylock.DuplicatesHarmless(""), efficiencylock.Config{}, efficiencylock.ErrInvalidReason},
		{"whitespace reason", db.Client, efficiencylock.DuplicatesHarmless(" \t\n "), efficiencylock.Config{}, efficiencylock.ErrInvalidReason},
		{"zero reason", db.Client, efficiencylock.Reason{}, efficiencylock.Config{}, efficiencylock.ErrInvalidReason},
		{"huge reason", db.Client, efficiencylock.DuplicatesHarmless(strings.Repeat("a", 300)), efficiencylock.Config{}, efficiencylock.ErrInvalidReason},
		{"invalid UTF-8 reason", db.Client, efficiencylock.DuplicatesHarmless("ok\xff"), efficiencylock.Config{}, efficiencylock.ErrInvalidReason},
		{"tenant with slash", db.Client, efficiencylock.DuplicatesHarmless("x"), efficiencylock.Config{Tenant: "a/b"}, coord.ErrInvalidName},
		{"tenant with space", db.Client, efficiencylock.DuplicatesHarmless("x"), efficiencylock.Config{Tenant: "a b"}, coord.ErrInvalidName},
	} {
		l, err := efficiencylock.New(tc.client, tc.why, tc.cfg)
		if l != nil || !errors.Is(err, tc.want) {
			t.Errorf("%s: New = %v, %v; want %v", tc.name, l, err, tc.want)
		}
	}
	var re *efficiencylock.ReasonError
	if _, err := efficiencylock.New(db.Client, efficiencylock.DuplicatesHarmless(""), efficiencylock.Config{}); !errors.As(err, &re) {
		t.Errorf("empty reason: %v is not a *ReasonError", err)
	}
	// The zero Config and the client kinds of go-redis.
	uc := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{db.Client.Options().Addr}})
	defer uc.Close()
	if _, err := efficiencylock.New(uc, efficiencylock.DuplicatesHarmless("report regeneration"), efficiencylock.Config{}); err != nil {
		t.Errorf("New(UniversalClient, nil opts) = %v", err)
	}
}

func TestAcquireRejectsBadInput(t *testing.T) {
	t.Parallel()
	l, db := sharedLocker(t, efficiencylock.Config{})
	ctx := ctxT(t, 10*time.Second)
	for _, name := range []string{"", "a/b", "a b", "tab\t", "nul\x00", "bad\xffutf8", "..", ".", strings.Repeat("n", coord.MaxNameLen+1), "ctl\x07"} {
		if _, err := l.TryAcquire(ctx, name, time.Second, nil); !errors.Is(err, coord.ErrInvalidName) {
			t.Errorf("TryAcquire(%q) = %v, want coord.ErrInvalidName", name, err)
		}
		if _, err := l.Acquire(ctx, name, time.Second, nil); !errors.Is(err, coord.ErrInvalidName) {
			t.Errorf("Acquire(%q) = %v, want coord.ErrInvalidName", name, err)
		}
	}
	for _, ttl := range []time.Duration{0, -time.Second, time.Microsecond, 999 * time.Microsecond} {
		_, err := l.TryAcquire(ctx, "ok", ttl, nil)
		var te *efficiencylock.TTLError
		if !errors.As(err, &te) || !errors.Is(err, efficiencylock.ErrInvalidTTL) {
			t.Errorf("TryAcquire(ttl %v) = %v, want *TTLError", ttl, err)
		}
	}
	if keys := db.Client.Keys(ctx, "/tenants/"+db.Tenant+"/*").Val(); len(keys) != 0 {
		t.Fatalf("bad input wrote keys: %v", keys)
	}

	lk, err := l.TryAcquire(ctx, "ok", 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ttl := range []time.Duration{0, -1} {
		if err := lk.Refresh(ctx, ttl); !errors.Is(err, efficiencylock.ErrInvalidTTL) {
			t.Errorf("Refresh(%v) = %v, want ErrInvalidTTL", ttl, err)
		}
	}
	if lk.Context().Err() != nil {
		t.Fatal("a rejected Refresh ended the guard")
	}
	if err := lk.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}
