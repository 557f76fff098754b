package outbox_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// When PostgreSQL refuses to count a failure at all (not even with the fixed
// fallback text: here a CHECK refuses any attempt of the poison key), the
// batch's marks still commit alone: the other keys are published and marked
// exactly once, and the refusal is logged.
func TestFailureCountRefusedStillCommitsTheMarks(t *testing.T) {
	log := &logged{}
	db, ob := setup(t, outbox.Config{Table: "ob", PollInterval: 20 * time.Millisecond, Logger: slog.New(log),
		Backoff: coord.Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond}})
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `ALTER TABLE ob ADD CONSTRAINT no_poison_attempts CHECK (aggregateid <> 'poison' OR attempts = 0)`); err != nil {
		t.Fatal(err)
	}
	pub, good := poisonBatch(t, db, ob, 6, errors.New("broker rejects this key"))
	r := newRelay(t, ob, db.Pool, pub)
	stop := runRelays(t, r)
	coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "the other keys' events marked", func() bool {
		return count(t, db.Pool, `SELECT count(*) FROM ob WHERE published_at IS NULL AND aggregateid <> 'poison'`) == 0
	})
	// The poison head, never counted, is published again at once: stop it.
	stop()
	pub.goodOnce(t, good)
	if n := len(log.with("outbox relay: could not count publish failures; committing the marks alone", "err")); n < 1 {
		t.Fatal("the refused failure count was not logged")
	}
}

// A refusal at COMMIT (a deferred constraint: the transaction is over, not
// aborted) is the batch's database error, reported with its cause: there is no
// savepoint left to fall back to, and none is tried. Either at the first COMMIT
// (refused=record: the failure's record) or at the fallback's (refused=fallback:
// the error text was refused first, then the count at COMMIT).
func TestFailureRecordRefusedAtCommitIsReportedWithItsCause(t *testing.T) {
	for _, refused := range []string{"record", "fallback"} {
		t.Run("refused="+refused, func(t *testing.T) {
			log := &logged{}
			db, ob := setup(t, outbox.Config{Table: "ob", PollInterval: 20 * time.Millisecond, Logger: slog.New(log),
				Backoff: coord.Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond}})
			ctx := context.Background()
			if _, err := db.Pool.Exec(ctx, `CREATE FUNCTION refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN RAISE EXCEPTION 'refused at commit by the test'; END $$;
				CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER UPDATE ON ob DEFERRABLE INITIALLY DEFERRED
				FOR EACH ROW WHEN (NEW.attempts > 0) EXECUTE FUNCTION refuse_at_commit()`); err != nil {
				t.Fatal(err)
			}
			if refused == "fallback" {
				if _, err := db.Pool.Exec(ctx, `ALTER TABLE ob ADD CONSTRAINT no_unrecordable CHECK (last_error NOT LIKE '%unrecordable%')`); err != nil {
					t.Fatal(err)
				}
			}
			pub := newCountingPublisher(map[string]error{"poison": errors.New("unrecordable broker error")})
			enqueue(t, db.Pool, ob, ev("poison", 0), ev("good", 0))
			r := newRelay(t, ob, db.Pool, pub)
			stop := runRelays(t, r)
			const failed = "outbox relay: batch failed, retrying"
			coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "a failed batch", func() bool { return len(log.with(failed, "err")) >= 1 })
			stop()
			if e := log.with(failed, "err")[0].String(); !strings.Contains(e, "refused at commit by the test") {
				t.Fatalf("the failed batch's err %q, want the refusal at COMMIT", e)
			}
			if n := len(log.with("outbox relay: could not count publish failures; committing the marks alone", "err")); n != 0 {
				t.Fatal("fell back to committing the marks alone after the transaction was over")
			}
			if refused == "record" {
				if n := len(log.with("outbox relay: could not record publish failures; counting the attempts without their error text", "err")); n != 0 {
					t.Fatal("fell back to the fixed error text after the transaction was over")
				}
			}
		})
	}
}
