package fencetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// memResource is an in-memory resource; with fenced false it ignores tokens, the
// bug the kit exists to catch.
type memResource struct {
	fenced  bool
	mu      sync.Mutex
	highest map[string]int64
	values  map[string]string
}

func newMem(fenced bool) *memResource {
	return &memResource{fenced: fenced, highest: map[string]int64{}, values: map[string]string{}}
}

func (m *memResource) Write(_ context.Context, tok coord.Token, key, value string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fenced && tok.Revision() < m.highest[key] {
		return &coord.StaleTokenError{Presented: tok}
	}
	m.highest[key] = max(m.highest[key], tok.Revision())
	m.values[key] = value
	return nil
}

func (m *memResource) Read(_ context.Context, key string) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.values[key]
	return v, ok, nil
}

// rejectAll refuses every write: fencing by refusing everything is not fencing.
type rejectAll struct{ memResource }

func (*rejectAll) Write(_ context.Context, tok coord.Token, _, _ string) error {
	return &coord.StaleTokenError{Presented: tok}
}

// The kit passes a correct resource and fails each broken one, check by check: a
// kit that cannot fail certifies nothing.
func TestKitCatchesBrokenResources(t *testing.T) {
	cfg := Config{Endpoints: coordtest.Etcd(t).Endpoints}.withDefaults()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	k := newKit(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	checks := map[string]func(context.Context, *kit, Resource, string) error{
		"stale": checkStale, "equal": checkEqual, "newer": checkNewer, "concurrent": checkConcurrent, "paused": checkPausedHolder,
	}
	for name, check := range checks {
		if err := check(ctx, k, newMem(true), k.uniqueName(t)+name); err != nil {
			t.Errorf("%s on a fenced resource: %v", name, err)
		}
	}
	for _, name := range []string{"stale", "concurrent", "paused"} {
		if err := checks[name](ctx, k, newMem(false), k.uniqueName(t)+name); err == nil {
			t.Errorf("%s passed an unfenced resource", name)
		} else {
			t.Logf("%s on an unfenced resource: %v", name, err)
		}
	}
	for _, name := range []string{"equal", "newer", "concurrent"} {
		if err := checks[name](ctx, k, &rejectAll{}, k.uniqueName(t)+name); err == nil {
			t.Errorf("%s passed a resource that rejects everything", name)
		}
	}
}

func TestVerifyHistory(t *testing.T) {
	t5, _ := coord.ParseToken("/l@5")
	t7, _ := coord.ParseToken("/l@7")
	stale := &coord.StaleTokenError{Presented: t5}
	for _, c := range []struct {
		name  string
		ops   []op
		reads []string
		final string
		ok    bool
	}{
		{"good", []op{{tok: t5, value: "5/0/0", start: 1, end: 2}, {tok: t7, value: "7/0/1", start: 3, end: 4}, {tok: t5, value: "5/1/0", start: 5, end: 6, err: stale}}, []string{"5/0/0", "7/0/1"}, "7/0/1", true},
		{"regression", []op{{tok: t7, value: "7/0/0", start: 1, end: 2}, {tok: t5, value: "5/0/1", start: 3, end: 4}}, nil, "5/0/1", false},
		{"overlapping old write may land", []op{{tok: t7, value: "7/0/0", start: 1, end: 4}, {tok: t5, value: "5/0/1", start: 2, end: 3}}, nil, "7/0/0", true},
		{"unjustified rejection", []op{{tok: t5, value: "5/0/0", start: 1, end: 2, err: stale}, {tok: t7, value: "7/0/0", start: 3, end: 4}}, nil, "7/0/0", false},
		{"reads go back", []op{{tok: t5, value: "5/0/0", start: 1, end: 2}, {tok: t7, value: "7/0/1", start: 3, end: 4}}, []string{"7/0/1", "5/0/0"}, "7/0/1", false},
		{"read a rejected value", []op{{tok: t7, value: "7/0/0", start: 1, end: 2}, {tok: t5, value: "5/0/1", start: 3, end: 4, err: stale}}, []string{"5/0/1"}, "7/0/0", false},
		{"final not newest", []op{{tok: t5, value: "5/0/0", start: 1, end: 4}, {tok: t7, value: "7/0/1", start: 2, end: 3}}, nil, "5/0/0", false},
		{"other error", []op{{tok: t5, value: "5/0/0", start: 1, end: 2, err: errors.New("disk full")}}, nil, "", false},
	} {
		err := verifyHistory(c.ops, c.reads, c.final)
		if (err == nil) != c.ok {
			t.Errorf("%s: verifyHistory = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}
