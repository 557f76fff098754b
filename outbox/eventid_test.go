package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// An event id from the wire that PostgreSQL cannot store as text (a NUL byte,
// invalid UTF-8: a Kafka header is any bytes) is refused by the inbox as a typed
// ErrInvalidID before any statement, so the consumer gives the delivery up
// instead of retrying a database error forever (a poison message that would stop
// its partition).
func TestInboxRefusesEventIDsPostgresCannotStore(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx := context.Background()
	in, err := outbox.NewInbox(outbox.InboxConfig{Table: "inbox"})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	c, err := outbox.NewConsumer(outbox.ConsumerConfig[string]{Name: "c", DB: db.Pool, Inbox: in, MaxDeliveries: 3,
		Backoff: coord.Backoff{Base: time.Millisecond, Cap: time.Millisecond},
		Handler: func(context.Context, pgx.Tx, string) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"evt\x00nul", "evt\xffbad", "cut \xe2\x82"} {
		err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			_, err := in.ProcessTx(ctx, tx, "c", id, func(context.Context, pgx.Tx) error { return nil })
			if !errors.Is(err, outbox.ErrInvalidID) {
				t.Errorf("ProcessTx(%q) = %v, want ErrInvalidID", id, err)
			}
			_, serr := tx.Exec(ctx, "SELECT 1") // tx is still usable: nothing was sent
			return serr
		})
		if err != nil {
			t.Errorf("id %q: the transaction is no longer usable: %v", id, err)
		}
		if v := c.Handle(ctx, "m", id, 1); v.Action != outbox.Drop || !errors.Is(v.Err, outbox.ErrInvalidID) {
			t.Errorf("Handle(id %q) = %v %v, want Drop with ErrInvalidID (a retry fails the same way forever)", id, v.Action, v.Err)
		}
	}
}
