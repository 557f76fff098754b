package saga

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
)

func TestHappyPath(t *testing.T) {
	e, c, def := newFastClient(t)
	run(t, c)
	id := start(t, context.Background(), c, def, order{Amount: 42}, nil)
	i := waitState(t, c, id, 30*time.Second, StateCompleted, StateCompensated, StateNeedsHuman)
	if i.State != StateCompleted || i.PivotAt == nil || i.Step != len(fixtureSteps) {
		t.Fatalf("saga %+v", i)
	}
	got := effects(t, e.db.Pool, id)
	for _, s := range fixtureSteps {
		if got[s+"/action"] != 1 {
			t.Errorf("step %s ran %d times at the participant", s, got[s+"/action"])
		}
	}
	if len(got) != len(fixtureSteps) {
		t.Errorf("effects %v", got)
	}
	// data mutations and outputs were committed step by step
	var o order
	if err := json.Unmarshal(i.Data, &o); err != nil || !slices.Equal(o.Seen, fixtureSteps) || o.Amount != 42 {
		t.Errorf("data %s %v", i.Data, err)
	}
	if string(i.Outputs["charge"]) != `"charge:`+id+`"` {
		t.Errorf("outputs %v", i.Outputs)
	}
	if s := c.Stats(); s.Steps != 5 || s.Claims < 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestBusinessFailureCompensatesInReverse(t *testing.T) {
	e, c, def := newFastClient(t)
	run(t, c)
	ctx := context.Background()
	for _, failAt := range []string{"reserve", "charge", "ship"} {
		id := start(t, ctx, c, def, order{FailAt: failAt}, nil)
		i := waitState(t, c, id, 30*time.Second, StateCompleted, StateCompensated, StateNeedsHuman)
		if i.State != StateCompensated || !strings.Contains(i.Failure, failAt+" declined") {
			t.Fatalf("fail at %s: %+v", failAt, i)
		}
		got := effects(t, e.db.Pool, id)
		want := map[string]int{}
		for _, s := range fixtureSteps[:slices.Index(fixtureSteps, failAt)] {
			want[s+"/action"], want[s+"/compensate"] = 1, 1
		}
		if len(got) != len(want) {
			t.Fatalf("fail at %s: effects %v, want %v", failAt, got, want)
		}
		for k, n := range want {
			if got[k] != n {
				t.Fatalf("fail at %s: effects %v, want %v", failAt, got, want)
			}
		}
		if failAt == "ship" {
			var order []string
			rows, _ := e.db.Pool.Query(ctx, `SELECT step FROM effects WHERE saga_id = $1 AND op = 'compensate' ORDER BY at`, id)
			for rows.Next() {
				var s string
				rows.Scan(&s)
				order = append(order, s)
			}
			rows.Close()
			if !slices.Equal(order, []string{"charge", "reserve"}) {
				t.Fatalf("compensation order %v, want newest first", order)
			}
		}
	}
}

func TestAfterPivotOnlyForward(t *testing.T) {
	e, c, def := newFastClient(t)
	run(t, c)
	ctx := context.Background()
	// A business failure after the pivot is not compensated: retried forward.
	id, err := Start(ctx, c, def, order{FailAt: "notify"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		i, err := c.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if i.State != StateRunning {
			t.Fatalf("state %s after a post-pivot failure", i.State)
		}
		if i.Attempts >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no forward retries: %+v", i)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The table refuses compensation past the pivot as well.
	_, err = e.db.Pool.Exec(ctx, `UPDATE coord_sagas SET state = 'compensating' WHERE id = $1`, id)
	if err == nil || !strings.Contains(err.Error(), "no_comp_after_pivot") {
		t.Fatalf("CHECK constraint did not refuse: %v", err)
	}
	if err := c.Cancel(ctx, id, "too late"); !errors.Is(err, ErrPastPivot) {
		t.Fatalf("Cancel past pivot = %v", err)
	}
	if got := effects(t, e.db.Pool, id); got["charge/compensate"]+got["reserve/compensate"] != 0 {
		t.Fatalf("compensated after the pivot: %v", got)
	}
	if c.Stats().Retries < 3 {
		t.Fatalf("retries %+v", c.Stats())
	}
}

func TestTechnicalFailureRetries(t *testing.T) {
	e, c, def := newFastClient(t)
	run(t, c)
	id := start(t, context.Background(), c, def, order{FlakyAt: "charge"}, nil)
	i := waitState(t, c, id, 30*time.Second, StateCompleted, StateCompensated, StateNeedsHuman)
	if i.State != StateCompleted || !strings.Contains(i.LastError, "flaky") {
		t.Fatalf("saga %+v", i)
	}
	if n := e.p.callCount("charge/action"); n != 3 {
		t.Fatalf("charge called %d times, want 3 (two flaky attempts)", n)
	}
	if got := effects(t, e.db.Pool, id); got["charge/action"] != 1 {
		t.Fatalf("effects %v", got)
	}
}

func TestStartTx(t *testing.T) {
	e, c, def := newFastClient(t)
	ctx := context.Background()
	tx, err := e.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id, err := StartTx(ctx, tx, c, def, order{}, &StartOpts{ID: "order-1"})
	if err != nil || id != "order-1" {
		t.Fatal(id, err)
	}
	tx.Rollback(ctx)
	if _, err := c.Get(ctx, "order-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rolled-back start is visible: %v", err)
	}
	tx, _ = e.db.Pool.Begin(ctx)
	if _, err := StartTx(ctx, tx, c, def, order{}, &StartOpts{ID: "order-1"}); err != nil {
		t.Fatal(err)
	}
	// A reused id in the same transaction: typed, and the tx stays usable.
	_, err = StartTx(ctx, tx, c, def, order{}, &StartOpts{ID: "order-1"})
	var ae *AlreadyStartedError
	if !errors.As(err, &ae) || !errors.Is(err, ErrAlreadyStarted) || ae.Type != "order" {
		t.Fatalf("reused id: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	run(t, c)
	waitState(t, c, "order-1", 30*time.Second, StateCompleted)
}

func TestStartRejectsBadInput(t *testing.T) {
	e := newEnv(t)
	cfg := fastConfig()
	cfg.MaxDataBytes = 200
	c, def := e.client(t, cfg)
	ctx := context.Background()
	cases := []struct {
		data order
		opts *StartOpts
		want error
	}{
		{order{FailAt: "bad\xffutf8"}, nil, ErrInvalidData},
		{order{FailAt: strings.Repeat("x", 300)}, nil, ErrTooLarge},
		{order{}, &StartOpts{ID: "a/b"}, coord.ErrInvalidName},
		{order{}, &StartOpts{ID: "a\x00"}, coord.ErrInvalidName},
		{order{}, &StartOpts{ID: strings.Repeat("i", 201)}, coord.ErrInvalidName},
		{order{}, &StartOpts{Delay: -time.Second}, ErrInvalidConfig},
	}
	for _, tc := range cases {
		if _, err := Start(ctx, c, def, tc.data, tc.opts); !errors.Is(err, tc.want) {
			t.Errorf("Start(%+v, %+v) = %v, want %v", tc.data, tc.opts, err, tc.want)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Start(cancelled, c, def, order{}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
	if n, _ := c.List(ctx, nil); len(n) != 0 {
		t.Fatalf("rejected starts stored %d sagas", len(n))
	}
	// A hostile table name is quoted, never interpreted: the table gets that
	// literal name and the table it tries to drop survives.
	const hostile = `x" ; DROP TABLE effects; --`
	hc, err := NewClient(e.db.Pool, Config{Table: hostile})
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	if err := hc.Migrate(ctx, e.db.Pool); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename IN ($2, 'effects')`,
		e.db.Schema, hostile).Scan(&n); err != nil || n != 2 {
		t.Fatalf("hostile table name: %d of the 2 tables exist (%v)", n, err)
	}
}

// TestNotifyWakesRunner: with polling effectively off, only NOTIFY can wake the
// runner for a new saga.
func TestNotifyWakesRunner(t *testing.T) {
	e := newEnv(t)
	cfg := fastConfig()
	cfg.PollInterval = time.Hour
	c, def := e.client(t, cfg)
	run(t, c)
	time.Sleep(200 * time.Millisecond) // the runner's first poll is over
	id := start(t, context.Background(), c, def, order{}, nil)
	waitState(t, c, id, 20*time.Second, StateCompleted)
}

func TestCustomTable(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	migrateTable(t, e.db.Pool, "Order_sagas")
	cfg := fastConfig()
	cfg.Table = "Order_sagas"
	c, def := e.client(t, cfg)
	run(t, c)
	id := start(t, ctx, c, def, order{}, nil)
	waitState(t, c, id, 30*time.Second, StateCompleted)
	var n int
	if err := e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM "Order_sagas"`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("custom table rows %d %v", n, err)
	}
}
