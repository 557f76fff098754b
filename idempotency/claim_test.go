package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// queryLog counts the statements a pool sends, for tests of Do's round trips.
type queryLog struct {
	mu  sync.Mutex
	sql []string
}

func (l *queryLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	l.sql = append(l.sql, d.SQL)
	l.mu.Unlock()
	return ctx
}

func (l *queryLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *queryLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	l.mu.Lock()
	l.sql = append(l.sql, "<batch>")
	l.mu.Unlock()
	return ctx
}

func (l *queryLog) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (l *queryLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// take returns the statements and batches sent since the last take.
func (l *queryLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.sql
	l.sql = nil
	return out
}

// tracedStore is newStore on a pool whose round trips are logged.
func tracedStore(t *testing.T) (*idempotency.Store, *coordtest.PostgresDB, *queryLog) {
	t.Helper()
	_, db := newStore(t, idempotency.Config{}) // migrated schema and effects table
	pc, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	log := &queryLog{}
	pc.ConnConfig.Tracer = log
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := idempotency.New(pool, idempotency.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s, db, log
}

// A new key costs the bare transaction's round trips (BEGIN with the claim, the
// effect, the key row with COMMIT); while most requests are replays Do reads
// first, so that a replay is one statement; and back again.
func TestDoRoundTripsFollowTheReplayShare(t *testing.T) {
	s, _, log := tracedStore(t)
	ctx := context.Background()
	key := func(i int) idempotency.Key { return idempotency.Key{Scope: "acme", ID: "rt-" + strconv.Itoa(i)} }
	noop := func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		_, err := tx.Exec(ctx, `SELECT 1`)
		return idempotency.Response{Status: 201, Body: []byte("ok")}, err
	}
	if _, err := s.Do(ctx, key(0), fp("a"), noop, nil); err != nil {
		t.Fatal(err)
	}
	log.take() // the pool's first connection may run setup queries
	if _, err := s.Do(ctx, key(1), fp("a"), noop, nil); err != nil {
		t.Fatal(err)
	}
	if got := log.take(); len(got) != 3 || got[0] != "<batch>" || got[1] != "SELECT 1" || got[2] != "<batch>" {
		t.Fatalf("new key sent %q, want [<batch> SELECT 1 <batch>]", got)
	}
	// A replay while most requests are new: the claim round trip, then ROLLBACK.
	r, err := s.Do(ctx, key(1), fp("a"), noop, nil)
	if err != nil || !r.Replayed {
		t.Fatalf("replay: %+v %v", r, err)
	}
	if got := log.take(); len(got) != 2 || got[0] != "<batch>" || !strings.EqualFold(got[1], "rollback") {
		t.Fatalf("replay after new keys sent %q, want [<batch> rollback]", got)
	}
	// A retry storm: after a run of replays, a replay is one lookup.
	for range 20 {
		if r, err := s.Do(ctx, key(1), fp("a"), noop, nil); err != nil || !r.Replayed {
			t.Fatalf("replay: %+v %v", r, err)
		}
	}
	log.take()
	if r, err := s.Do(ctx, key(1), fp("a"), noop, nil); err != nil || !r.Replayed {
		t.Fatalf("replay: %+v %v", r, err)
	}
	if got := log.take(); len(got) != 1 || !strings.HasPrefix(got[0], "SELECT fingerprint") {
		t.Fatalf("replay in a retry storm sent %q, want one lookup", got)
	}
	// AssumeNew claims first whatever the share.
	if _, err := s.Do(ctx, key(2), fp("a"), noop, &idempotency.DoOpts{AssumeNew: true}); err != nil {
		t.Fatal(err)
	}
	if got := log.take(); len(got) != 3 {
		t.Fatalf("AssumeNew sent %q, want 3 round trips", got)
	}
	// New keys again: back to claiming first.
	for i := range 40 {
		if _, err := s.Do(ctx, key(100+i), fp("a"), noop, nil); err != nil {
			t.Fatal(err)
		}
	}
	log.take()
	if _, err := s.Do(ctx, key(3), fp("a"), noop, nil); err != nil {
		t.Fatal(err)
	}
	if got := log.take(); len(got) != 3 {
		t.Fatalf("new key after new keys sent %q, want 3 round trips", got)
	}
}

// fn gets a transaction with savepoints; ending Do's own transaction is refused,
// and the key and the effect still commit together.
func TestDoTxHandleSavepointsAndRefusesCommit(t *testing.T) {
	s, db := newStore(t, idempotency.Config{})
	ctx := context.Background()
	key := idempotency.Key{Scope: "acme", ID: "savepoints"}
	var commitErr, rollbackErr error
	res, err := s.Do(ctx, key, fp("a"), func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		sp, err := tx.Begin(ctx)
		if err != nil {
			return idempotency.Response{}, err
		}
		if _, err := sp.Exec(ctx, `INSERT INTO effects (scope, key, note) VALUES ($1, $2, 'undone')`, key.Scope, key.ID); err != nil {
			return idempotency.Response{}, err
		}
		if err := sp.Rollback(ctx); err != nil {
			return idempotency.Response{}, err
		}
		if err := sp.Rollback(ctx); !errors.Is(err, pgx.ErrTxClosed) {
			return idempotency.Response{}, errors.New("second Rollback of a savepoint: " + errString(err))
		}
		sp2, err := tx.Begin(ctx)
		if err != nil {
			return idempotency.Response{}, err
		}
		if _, err := sp2.Exec(ctx, `INSERT INTO effects (scope, key, note) VALUES ($1, $2, 'kept')`, key.Scope, key.ID); err != nil {
			return idempotency.Response{}, err
		}
		if err := sp2.Commit(ctx); err != nil {
			return idempotency.Response{}, err
		}
		commitErr, rollbackErr = tx.Commit(ctx), tx.Rollback(ctx)
		return idempotency.Response{Status: 201, Body: []byte("ok")}, nil
	}, nil)
	if err != nil || res.Replayed {
		t.Fatalf("Do: %+v %v", res, err)
	}
	if commitErr == nil || rollbackErr == nil {
		t.Fatalf("fn ending Do's transaction: Commit %v, Rollback %v; want errors", commitErr, rollbackErr)
	}
	var notes []string
	rows, err := db.Pool.Query(ctx, `SELECT note FROM effects WHERE key = $1`, key.ID)
	if err != nil {
		t.Fatal(err)
	}
	notes, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(notes) != 1 || notes[0] != "kept" {
		t.Fatalf("effects = %q %v, want [kept]", notes, err)
	}
	if r, ok, err := s.Lookup(ctx, key, fp("a")); !ok || err != nil || string(r.Response.Body) != "ok" {
		t.Fatalf("key after Do: %+v %v %v", r, ok, err)
	}
}

func fpBytes(s string) []byte { f := fp(s); return f[:] }

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// Large objects work inside Do's transaction.
func TestDoTxHandleLargeObjects(t *testing.T) {
	s, _ := newStore(t, idempotency.Config{})
	ctx := context.Background()
	key := idempotency.Key{Scope: "acme", ID: "lo"}
	res, err := s.Do(ctx, key, fp("a"), func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		lo := tx.LargeObjects()
		oid, err := lo.Create(ctx, 0)
		if err != nil {
			return idempotency.Response{}, err
		}
		obj, err := lo.Open(ctx, oid, pgx.LargeObjectModeWrite|pgx.LargeObjectModeRead)
		if err != nil {
			return idempotency.Response{}, err
		}
		if _, err := obj.Write([]byte("large")); err != nil {
			return idempotency.Response{}, err
		}
		if err := obj.Close(); err != nil {
			return idempotency.Response{}, err
		}
		return idempotency.Response{Status: 201, Body: []byte(strconv.FormatUint(uint64(oid), 10))}, nil
	}, nil)
	if err != nil {
		t.Fatalf("Do with large objects: %v", err)
	}
	if len(res.Response.Body) == 0 {
		t.Fatal("no oid")
	}
}

// A duplicate that waited for the first request's transaction runs its effect with
// the pool's own lock_timeout, not with WaitTimeout.
func TestDoAfterWaitingRunsWithTheCallersLockTimeout(t *testing.T) {
	s, db := newStore(t, idempotency.Config{WaitTimeout: 5 * time.Second})
	ctx := context.Background()
	key := idempotency.Key{Scope: "acme", ID: "waited"}
	tx := holdKey(t, s, db, key)
	type out struct {
		res         idempotency.Result
		err         error
		lockTimeout string
	}
	done := make(chan out, 1)
	go func() {
		var o out
		o.res, o.err = s.Do(ctx, key, fp("a"), func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
			if err := tx.QueryRow(ctx, `SHOW lock_timeout`).Scan(&o.lockTimeout); err != nil {
				return idempotency.Response{}, err
			}
			return effect(key, "second")(ctx, tx)
		}, nil)
		done <- o
	}()
	// The duplicate is waiting on the key's lock: prove it before ending the first.
	var firstPID int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&firstPID); err != nil {
		t.Fatal(err)
	}
	coordtest.Until(t, 10*time.Second, 10*time.Millisecond, "the duplicate to wait on the key's advisory lock", func() bool {
		var n int
		err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event = 'advisory' AND $1 = ANY(pg_blocking_pids(pid))`, firstPID).Scan(&n)
		return err == nil && n == 1
	})
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var o out
	select {
	case o = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the duplicate did not finish within 20s of the first rolling back")
	}
	if o.err != nil || o.res.Replayed {
		t.Fatalf("duplicate after the first rolled back: %+v %v, want it executed", o.res, o.err)
	}
	if o.lockTimeout != "0" {
		t.Fatalf("effect ran with lock_timeout %q, want the pool's \"0\"", o.lockTimeout)
	}
	wantEffects(t, db, key, 1)
}

// A writer that does not take the key's lock (here: a plain INSERT, as a phased
// Run's claim is) commits the key while fn runs: Do rolls fn's effect back and
// answers as the committed row says.
func TestDoLosesToAWriterThatCommittedTheKeyMeanwhile(t *testing.T) {
	s, db := newStore(t, idempotency.Config{})
	ctx := context.Background()
	key := idempotency.Key{Scope: "acme", ID: "overtaken"}
	res, err := s.Do(ctx, key, fp("a"), func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		if _, err := db.Pool.Exec(ctx, `INSERT INTO `+s.Table()+` (scope, idem_key, fingerprint, status, response_status, response_body)
			VALUES ($1, $2, $3, 2, 200, 'theirs')`, key.Scope, key.ID, fpBytes("a")); err != nil {
			return idempotency.Response{}, err
		}
		return effect(key, "ours")(ctx, tx)
	}, nil)
	if err != nil || !res.Replayed || !bytes.Equal(res.Response.Body, []byte("theirs")) {
		t.Fatalf("Do overtaken: %+v %v, want the committed row replayed", res, err)
	}
	if n := effectCount(t, db, key); n != 0 {
		t.Fatalf("effects = %d, want 0 (ours rolled back)", n)
	}
	// DoTx: the caller's transaction is aborted; the error says retry.
	key2 := idempotency.Key{Scope: "acme", ID: "overtaken-tx"}
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		_, err := s.DoTx(ctx, tx, key2, fp("a"), func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
			if _, err := db.Pool.Exec(ctx, `INSERT INTO `+s.Table()+` (scope, idem_key, fingerprint, status)
				VALUES ($1, $2, $3, 1)`, key2.Scope, key2.ID, fpBytes("a")); err != nil {
				return idempotency.Response{}, err
			}
			return effect(key2, "ours")(ctx, tx)
		}, nil)
		return err
	})
	if !errors.Is(err, idempotency.ErrInFlight) {
		t.Fatalf("DoTx overtaken: %v, want ErrInFlight", err)
	}
}

// Two Stores on one table — one naming its Schema, one reaching the table through
// the search_path — serialize a key on the same lock: the duplicate waits for the
// first request and replays it; its effect never runs.
func TestStoresNamingTheSchemaOrNotShareTheKeyLock(t *testing.T) {
	bare, db := newStore(t, idempotency.Config{WaitTimeout: 10 * time.Second}) // Schema "": the pool's search_path
	named, err := idempotency.New(db.Pool, idempotency.Config{Schema: db.Schema, WaitTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := idempotency.Key{Scope: "acme", ID: "one-table-two-names"}
	dupRan := make(chan struct{})
	firstDone := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		_, err := bare.Do(ctx, key, fp("a"), func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
			close(started)
			select { // hold the key until the duplicate ran its effect, or 2s
			case <-dupRan:
			case <-time.After(2 * time.Second):
			}
			return effect(key, "first")(ctx, tx)
		}, nil)
		firstDone <- err
	}()
	coordtest.Recv(t, started, 30*time.Second, "the first request running its effect")
	ran := false
	res, err := named.Do(ctx, key, fp("a"), func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		ran = true
		close(dupRan)
		return effect(key, "duplicate")(ctx, tx)
	}, &idempotency.DoOpts{AssumeNew: true})
	if ferr := coordtest.Recv(t, firstDone, 30*time.Second, "the first request's answer"); ferr != nil {
		t.Fatalf("first request: %v", ferr)
	}
	if ran {
		t.Fatalf("the duplicate ran its effect while the first request held the key (then: %+v, %v)", res, err)
	}
	if err != nil || !res.Replayed {
		t.Fatalf("duplicate: %+v, %v; want the first request's replay", res, err)
	}
}
