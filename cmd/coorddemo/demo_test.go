package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestMain lets the test binary play the demo's child processes, as the demo
// binary does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-child" {
		os.Exit(runChild(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// TestDemo runs every part of the demo against the test servers: each verdict
// must hold, as it must for a newcomer running scripts/demo.sh.
func TestDemo(t *testing.T) {
	db := coordtest.Postgres(t) // fails with a hint when PostgreSQL is down
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e, err := newEnv(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	for _, p := range parts {
		verdict, ok := p.run(ctx, e)
		t.Logf("%s: %s", p.name, verdict)
		if !ok {
			t.Errorf("part %s: verdict does not hold: %s", p.name, verdict)
		}
	}
}
