package fencetest_test

import (
	"context"
	"sync"

	"github.com/coordkit/coordkit/coord"
)

// ledger is a team's own fenced resource: it remembers the newest token per key
// and refuses older ones.
type ledger struct {
	mu      sync.Mutex
	highest map[string]coord.Token
	values  map[string]string
}

func (l *ledger) Write(_ context.Context, tok coord.Token, key, value string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.highest[key]; ok {
		if c, _ := tok.Compare(h); c < 0 {
			return &coord.StaleTokenError{Presented: tok, Highest: h}
		}
	}
	l.highest[key], l.values[key] = tok, value
	return nil
}

func (l *ledger) Read(_ context.Context, key string) (string, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.values[key]
	return v, ok, nil
}

// Certify a resource in a team's own test:
//
//	func TestLedgerIsFenced(t *testing.T) {
//		etcd := coordtest.Etcd(t)
//		fencetest.Run(t, &ledger{highest: map[string]coord.Token{}, values: map[string]string{}},
//			fencetest.Config{Endpoints: etcd.Endpoints})
//	}
func Example() {
	_ = &ledger{highest: map[string]coord.Token{}, values: map[string]string{}}
}
