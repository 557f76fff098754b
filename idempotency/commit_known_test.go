package idempotency_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/coordkit/coordkit/idempotency"
)

// Do sends the key row with COMMIT, in one round trip. What the server answered
// to each of them stays known: a key row the server refuses (here a trigger)
// means COMMIT never ran — a definite failure with the server's error, the effect
// rolled back, the key free for a retry — never ErrCommitUnknown.
func TestDoKeyRowRefusedIsNotUnknown(t *testing.T) {
	s, db := newStore(t, idempotency.Config{})
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `CREATE FUNCTION refuse_key() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.idem_key = 'refused' THEN RAISE EXCEPTION 'key refused' USING ERRCODE = 'P0001'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_key BEFORE INSERT ON coord_idempotency_keys FOR EACH ROW EXECUTE FUNCTION refuse_key()`); err != nil {
		t.Fatal(err)
	}
	key := idempotency.Key{Scope: "acme", ID: "refused"}
	for _, o := range []*idempotency.DoOpts{nil, {AssumeNew: true}} {
		_, err := s.Do(ctx, key, fp("a"), effect(key, "x"), o)
		var pgErr *pgconn.PgError
		if errors.Is(err, idempotency.ErrCommitUnknown) || !errors.As(err, &pgErr) || pgErr.Code != "P0001" {
			t.Fatalf("Do whose key row the server refused = %v, want the trigger's error, not ErrCommitUnknown", err)
		}
		if n := effectCount(t, db, key); n != 0 {
			t.Fatalf("%d effects committed with a refused key row", n)
		}
	}
}

// A context that ends while fn runs (fn returns nil regardless) is seen before
// the key row and COMMIT go out: nothing was sent, nothing committed — Do
// returns the context's error, not ErrCommitUnknown, and a retry runs the effect.
func TestDoContextEndedBeforeCommitIsNotUnknown(t *testing.T) {
	s, db := newStore(t, idempotency.Config{})
	key := idempotency.Key{Scope: "acme", ID: "cancelled-before-commit"}
	ctx, cancel := context.WithCancel(context.Background())
	_, err := s.Do(ctx, key, fp("a"), func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		r, err := effect(key, "cancelled")(ctx, tx)
		cancel()
		return r, err
	}, &idempotency.DoOpts{AssumeNew: true})
	if errors.Is(err, idempotency.ErrCommitUnknown) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Do whose context ended before COMMIT = %v, want context.Canceled, not ErrCommitUnknown", err)
	}
	if n := effectCount(t, db, key); n != 0 {
		t.Fatalf("%d effects committed after the context ended before COMMIT", n)
	}
	res, err := s.Do(context.Background(), key, fp("a"), effect(key, "retry"), nil)
	if err != nil || res.Replayed {
		t.Fatalf("retry: %+v, %v, want the effect run", res, err)
	}
}
