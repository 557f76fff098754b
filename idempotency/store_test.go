package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/coordkit/coordkit/idempotency"
)

func fp(s string) idempotency.Fingerprint { return idempotency.FingerprintOf([]byte(s)) }

func TestDoOutcomes(t *testing.T) {
	s, db := newStore(t, idempotency.Config{})
	ctx := context.Background()
	key := idempotency.Key{Scope: "acme", ID: "k-1"}

	first, err := s.Do(ctx, key, fp("a"), effect(key, "first"), nil)
	if err != nil || first.Replayed {
		t.Fatalf("first: %+v, %v", first, err)
	}
	second, err := s.Do(ctx, key, fp("a"), effect(key, "second"), nil)
	if err != nil || !second.Replayed {
		t.Fatalf("second: %+v, %v", second, err)
	}
	if !bytes.Equal(first.Response.Body, second.Response.Body) || first.Response.Status != second.Response.Status ||
		second.Response.Header.Get("Location") != "/effects/k-1" {
		t.Fatalf("replay differs: %+v vs %+v", first.Response, second.Response)
	}
	wantEffects(t, db, key, 1)
	_, err = s.Do(ctx, key, fp("b"), effect(key, "other"), nil)
	var me *idempotency.MismatchError
	if !errors.As(err, &me) || !errors.Is(err, idempotency.ErrMismatch) {
		t.Fatalf("different fingerprint: %v, want *MismatchError", err)
	}
	// Same ID in another scope is another key: no collision.
	other := idempotency.Key{Scope: "acme2", ID: "k-1"}
	if r, err := s.Do(ctx, other, fp("b"), effect(other, "x"), nil); err != nil || r.Replayed {
		t.Fatalf("other scope: %+v, %v", r, err)
	}
	// Scope/ID pairs that concatenate equally do not collide either.
	a, b := idempotency.Key{Scope: "a:b", ID: "c"}, idempotency.Key{Scope: "a", ID: "b:c"}
	for _, k := range []idempotency.Key{a, b} {
		if r, err := s.Do(ctx, k, fp("same"), effect(k, "x"), nil); err != nil || r.Replayed {
			t.Fatalf("%s: %+v, %v", k, r, err)
		}
	}
}

func TestDoAssumeNewStillReplays(t *testing.T) {
	s, db := newStore(t, idempotency.Config{})
	ctx := context.Background()
	key := idempotency.Key{Scope: "acme", ID: "assume-new"}
	o := &idempotency.DoOpts{AssumeNew: true}
	first, err := s.Do(ctx, key, fp("a"), effect(key, "x"), o)
	if err != nil || first.Replayed {
		t.Fatalf("first: %+v %v", first, err)
	}
	again, err := s.Do(ctx, key, fp("a"), effect(key, "y"), o)
	if err != nil || !again.Replayed || !bytes.Equal(again.Response.Body, first.Response.Body) {
		t.Fatalf("replay: %+v %v", again, err)
	}
	if _, err := s.Do(ctx, key, fp("b"), effect(key, "z"), o); !errors.Is(err, idempotency.ErrMismatch) {
		t.Fatalf("mismatch: %v", err)
	}
	wantEffects(t, db, key, 1)
}

func TestDoEffectErrorRollsBackKey(t *testing.T) {
	s, db := newStore(t, idempotency.Config{})
	ctx := context.Background()
	key := idempotency.Key{Scope: "acme", ID: "fails"}
	boom := errors.New("boom")
	_, err := s.Do(ctx, key, fp("a"), func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		if _, err := effect(key, "x")(ctx, tx); err != nil {
			return idempotency.Response{}, err
		}
		return idempotency.Response{}, boom
	}, nil)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if n := effectCount(t, db, key); n != 0 {
		t.Fatalf("effects after failure = %d, want 0", n)
	}
	r, err := s.Do(ctx, key, fp("a"), effect(key, "retry"), nil)
	if err != nil || r.Replayed {
		t.Fatalf("retry: %+v, %v", r, err)
	}
	wantEffects(t, db, key, 1)
}

func TestDoTxJoinsCallerTransaction(t *testing.T) {
	s, db := newStore(t, idempotency.Config{})
	ctx := context.Background()
	key := idempotency.Key{Scope: "acme", ID: "tx-1"}

	// Rolled back by the caller: neither key nor effect remain.
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DoTx(ctx, tx, key, fp("a"), effect(key, "x"), nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Lookup(ctx, key, fp("a")); ok || err != nil {
		t.Fatalf("key survived rollback: %v %v", ok, err)
	}
	// Committed: both remain, and the caller's lock_timeout is untouched afterwards.
	tx, err = db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '7s'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DoTx(ctx, tx, key, fp("a"), effect(key, "y"), nil); err != nil {
		t.Fatal(err)
	}
	var lt string
	if err := tx.QueryRow(ctx, `SHOW lock_timeout`).Scan(&lt); err != nil || lt != "7s" {
		t.Fatalf("lock_timeout after DoTx = %q, %v; want 7s", lt, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wantEffects(t, db, key, 1)
	// A replay inside a transaction.
	tx, err = db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	r, err := s.DoTx(ctx, tx, key, fp("a"), effect(key, "z"), nil)
	if err != nil || !r.Replayed || !strings.Contains(string(r.Response.Body), `"note":"y"`) {
		t.Fatalf("replay in tx: %+v, %v", r, err)
	}
}

// A duplicate that arrives while the first request's transaction is open waits at
// most WaitTimeout, then gets *InFlightError; it never runs the effect.
func TestConcurrentDuplicateWaitIsBounded(t *testing.T) {
	s, db := newStore(t, idempotency.Config{WaitTimeout: 200 * time.Millisecond})
	ctx := context.Background()
	key := idempotency.Key{Scope: "acme", ID: "slow"}
	holdKey(t, s, db, key)
	ran := false
	start := time.Now()
	_, err := s.Do(ctx, key, fp("a"), func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		ran = true
		return idempotency.Response{}, nil
	}, nil)
	var ife *idempotency.InFlightError
	if !errors.As(err, &ife) || ife.RetryAfter < time.Second {
		t.Fatalf("duplicate: %v, want *InFlightError with RetryAfter ≥ 1s", err)
	}
	if ran {
		t.Fatal("duplicate ran the effect")
	}
	t.Logf("duplicate answered in-flight after %v", time.Since(start))
	// DoOpts without a WaitTimeout of their own keep the Store's (a zero wait
	// would be PostgreSQL's lock_timeout = 0: no timeout at all).
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := s.Do(octx, key, fp("a"), effect(key, "dup"), &idempotency.DoOpts{}); !errors.Is(err, idempotency.ErrInFlight) {
		t.Fatalf("duplicate with zero DoOpts: %v, want ErrInFlight after the Store's 200 ms wait", err)
	}
	// Same with DoTx.
	tx2, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback(ctx)
	if _, err := s.DoTx(ctx, tx2, key, fp("a"), effect(key, "dup"), nil); !errors.Is(err, idempotency.ErrInFlight) {
		t.Fatalf("DoTx duplicate: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	s, _ := newStore(t, idempotency.Config{MaxResponseBytes: 1024})
	ctx := context.Background()
	for _, k := range []idempotency.Key{
		{Scope: "", ID: "x"},
		{Scope: "acme", ID: ""},
		{Scope: "acme", ID: strings.Repeat("k", idempotency.MaxKeyLen+1)},
		{Scope: strings.Repeat("s", idempotency.MaxScopeLen+1), ID: "x"},
		{Scope: "acme", ID: "bad\x00key"},
		{Scope: "acme", ID: "ключ"},
		{Scope: "bad\xffscope", ID: "x"},
		{Scope: "tab\tscope", ID: "x"},
	} {
		var ke *idempotency.KeyError
		if _, err := s.Do(ctx, k, fp("a"), effect(k, "x"), nil); !errors.As(err, &ke) || !errors.Is(err, idempotency.ErrInvalidKey) {
			t.Errorf("key %q/%q: %v, want *KeyError", k.Scope, k.ID, err)
		}
	}
	key := idempotency.Key{Scope: "acme", ID: "big"}
	_, err := s.Do(ctx, key, fp("a"), func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		return idempotency.Response{Status: 200, Body: bytes.Repeat([]byte("x"), 2048)}, nil
	}, nil)
	if !errors.Is(err, idempotency.ErrResponseTooLarge) {
		t.Fatalf("oversized response: %v", err)
	}
	if _, ok, _ := s.Lookup(ctx, key, fp("a")); ok {
		t.Fatal("oversized response was stored")
	}
	// Cancelled context: typed context error, nothing stored.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	key = idempotency.Key{Scope: "acme", ID: "cancelled"}
	if _, err := s.Do(cctx, key, fp("a"), effect(key, "x"), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg   idempotency.Config
		field string
	}{
		{idempotency.Config{Retention: time.Hour}, "Retention"},
		{idempotency.Config{Table: "a.b"}, "Table"},
		{idempotency.Config{Table: strings.Repeat("t", 64)}, "Table"},
		// 50 bytes fit, but the derived "…_abandoned_idx" index name would not.
		{idempotency.Config{Table: strings.Repeat("t", 50)}, "Table"},
		{idempotency.Config{Table: "nul\x00"}, "Table"},
		{idempotency.Config{Schema: "bad\xff"}, "Schema"},
		{idempotency.Config{WaitTimeout: -time.Second}, "WaitTimeout"},
		{idempotency.Config{LockTimeout: time.Millisecond}, "LockTimeout"},
	} {
		_, err := idempotency.New(nil, tc.cfg)
		var ce *idempotency.ConfigError
		if !errors.Is(err, idempotency.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%+q: %v, want a *ConfigError for %s", tc.cfg.Table+tc.cfg.Schema, err, tc.field)
		}
	}
	// Any other name is fine: it is always quoted.
	for _, cfg := range []idempotency.Config{
		{Schema: "myschema", Table: "Keys_2", Retention: 48 * time.Hour},
		{Table: `keys"; DROP TABLE x; --`},
		{Table: strings.Repeat("t", 49)},
	} {
		if _, err := idempotency.New(nil, cfg); err != nil {
			t.Errorf("%q: %v", cfg.Table, err)
		}
	}
}

func TestCustomTableName(t *testing.T) {
	s, db := newStore(t, idempotency.Config{Table: "Idem_Keys"})
	ctx := context.Background()
	key := idempotency.Key{Scope: "acme", ID: "k"}
	if _, err := s.Do(ctx, key, fp("a"), effect(key, "x"), nil); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM "Idem_Keys"`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows in quoted table = %d, %v", n, err)
	}
	if s.Table() != `"Idem_Keys"` {
		t.Fatalf("Table() = %s", s.Table())
	}
}

// A per-call WaitTimeout below a millisecond still bounds the wait: it must not
// become lock_timeout "0ms", which PostgreSQL reads as no limit at all.
func TestSubMillisecondWaitTimeoutIsStillBounded(t *testing.T) {
	s, db := newStore(t, idempotency.Config{})
	ctx := context.Background()
	key := idempotency.Key{Scope: "acme", ID: "sub-ms"}
	holdKey(t, s, db, key)
	// The first request stays uncommitted until the test ends; the duplicate has
	// ten seconds before its own context gives up.
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, wait := range []time.Duration{time.Nanosecond, 500 * time.Microsecond} {
		_, err := s.Do(dctx, key, fp("a"), effect(key, "dup"), &idempotency.DoOpts{WaitTimeout: wait, AssumeNew: true})
		if !errors.Is(err, idempotency.ErrInFlight) {
			t.Fatalf("WaitTimeout %v: %v, want *InFlightError (a wait without limit ends only at the context's deadline)", wait, err)
		}
	}
}

// A COMMIT the server refuses (here a deferred foreign key the effect broke) is
// a known outcome: nothing committed, Do says so with the server's error, not
// ErrCommitUnknown, and the key stays free for a retry.
func TestDoCommitRefusedIsNotUnknown(t *testing.T) {
	s, db := newStore(t, idempotency.Config{})
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE deferred_parent (id int PRIMARY KEY);
		CREATE TABLE deferred_child (pid int REFERENCES deferred_parent DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	key := idempotency.Key{Scope: "acme", ID: "refused-at-commit"}
	_, err := s.Do(ctx, key, fp("a"), func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		_, err := tx.Exec(ctx, `INSERT INTO deferred_child VALUES (42)`) // checked at COMMIT
		return idempotency.Response{Status: 201}, err
	}, nil)
	var pgErr *pgconn.PgError
	if errors.Is(err, idempotency.ErrCommitUnknown) || !errors.As(err, &pgErr) || pgErr.Code != "23503" {
		t.Fatalf("Do whose COMMIT the server refused = %v, want the foreign key violation, not ErrCommitUnknown", err)
	}
	res, err := s.Do(ctx, key, fp("a"), effect(key, "retry"), nil)
	if err != nil || res.Replayed {
		t.Fatalf("retry after a refused COMMIT: %+v, %v, want the effect run (nothing was stored)", res, err)
	}
}

// A connection that died before the key row and COMMIT went out (here fn closes
// it) sent nothing: nothing committed, and Do says so with a definite error, not
// ErrCommitUnknown; a retry runs the effect. (A connection that fails while they
// are in flight is ErrCommitUnknown: TestAmbiguousCommitRetryIsExactlyOnce.)
func TestDoConnectionClosedBeforeCommitIsKnown(t *testing.T) {
	s, db := newStore(t, idempotency.Config{})
	key := idempotency.Key{Scope: "acme", ID: "closed-before-commit"}
	_, err := s.Do(context.Background(), key, fp("a"), func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		if _, err := effect(key, "lost")(ctx, tx); err != nil {
			return idempotency.Response{}, err
		}
		return idempotency.Response{Status: 201}, tx.Conn().Close(ctx) // the connection dies before COMMIT
	}, &idempotency.DoOpts{AssumeNew: true})
	if err == nil || errors.Is(err, idempotency.ErrCommitUnknown) {
		t.Fatalf("Do whose connection closed before COMMIT = %v, want a definite failure, not ErrCommitUnknown", err)
	}
	failedBeforeCommit(t, s, db, key, "on a connection closed before COMMIT")
}
