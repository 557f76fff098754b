// Package orders is a service that writes orders and tells the world: the
// dual writes hide behind helpers, interfaces and the SDK's own commits.
package orders

import (
	"context"
	"encoding/json"

	"example.com/coordvete2e/corpus/events"
	"example.com/coordvete2e/corpus/store"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/outbox"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Service places orders.
type Service struct {
	Pool   *pgxpool.Pool
	Repo   *store.Repo
	Bus    events.Bus
	Kafka  *kgo.Client
	NC     *nats.Conn
	Cache  *redis.Client
	Store  *idempotency.Store
	Outbox *outbox.Outbox
	Pub    outbox.Publisher
}

func (s *Service) placed(ctx context.Context, o store.Order) error {
	return events.Announce(ctx, s.Bus, "orders.placed", o)
}

func (s *Service) placedAll(ctx context.Context, os []store.Order) error {
	for _, o := range os {
		if err := s.placed(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// Place commits, then emits through the team's Bus interface (its dynamic
// type, in package events, publishes to NATS).
func (s *Service) Place(ctx context.Context, o store.Order) error {
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if err := s.Repo.Save(ctx, tx, o); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	payload, _ := json.Marshal(o)
	return s.Bus.Emit(ctx, "orders.placed", payload) // corpus: dualwrite
}

// PlaceViaHelpers commits in a helper of another package and publishes two
// calls deep in this one.
func (s *Service) PlaceViaHelpers(ctx context.Context, tx pgx.Tx, os []store.Order) error {
	for _, o := range os {
		if err := s.Repo.Save(ctx, tx, o); err != nil {
			return err
		}
	}
	if err := s.Repo.Finish(ctx, tx); err != nil {
		return err
	}
	return s.placedAll(ctx, os) // corpus: dualwrite
}

// PlaceInRepoTx publishes inside the repository's transaction callback:
// publish, then commit.
func (s *Service) PlaceInRepoTx(ctx context.Context, o store.Order) error {
	return s.Repo.InTx(ctx, func(tx pgx.Tx) error {
		if err := s.Repo.Save(ctx, tx, o); err != nil {
			return err
		}
		return events.Announce(ctx, s.Bus, "orders.placed", o) // corpus: dualwrite
	})
}

// PlaceWithTx publishes inside the repository's wrapped transaction callback.
func (s *Service) PlaceWithTx(ctx context.Context, o store.Order) error {
	return s.Repo.WithTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if err := s.Repo.Save(ctx, tx, o); err != nil {
			return err
		}
		return s.placed(ctx, o) // corpus: dualwrite
	})
}

// Import writes outside a transaction (autocommit), then publishes.
func (s *Service) Import(ctx context.Context, o store.Order) error {
	if err := s.Repo.Insert(ctx, o); err != nil {
		return err
	}
	return s.placed(ctx, o) // corpus: dualwrite
}

// Charge runs the fenced charge (pgfence.Exec commits), then produces to Kafka.
func (s *Service) Charge(ctx context.Context, tok coord.Token, o store.Order) error {
	err := pgfence.Exec(ctx, s.Pool, tok, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE orders SET charged = true WHERE id = $1`, o.ID)
		return err
	})
	if err != nil {
		return err
	}
	return s.Kafka.ProduceSync(ctx, &kgo.Record{Topic: "charges", Key: []byte(o.ID)}).FirstErr() // corpus: dualwrite
}

// Pay publishes inside the idempotency store's transaction.
func (s *Service) Pay(ctx context.Context, key idempotency.Key, fp idempotency.Fingerprint, o store.Order) (idempotency.Result, error) {
	return s.Store.Do(ctx, key, fp, func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		if err := s.Repo.Save(ctx, tx, o); err != nil {
			return idempotency.Response{}, err
		}
		if err := s.NC.Publish("payments.captured", []byte(o.ID)); err != nil { // corpus: dualwrite
			return idempotency.Response{}, err
		}
		return idempotency.Response{Status: 201}, nil
	}, nil)
}

// Refund commits and then hands the event to the outbox's broker publisher
// directly, outside any relay.
func (s *Service) Refund(ctx context.Context, tx pgx.Tx, id string) error {
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	errs := s.Pub.Publish(ctx, []outbox.Message{{Topic: "refunds", Key: id}}) // corpus: dualwrite
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// Producer mirrors kgo's client so tests can fake it.
type Producer interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

// Ship commits, then produces through the mirror interface.
func Ship(ctx context.Context, tx pgx.Tx, p Producer, id string) error {
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	return p.ProduceSync(ctx, &kgo.Record{Topic: "shipments", Key: []byte(id)}).FirstErr() // corpus: dualwrite
}

// Notify commits, then publishes through a Publish-shaped interface.
func Notify(ctx context.Context, tx pgx.Tx, s events.Sender, id string) error {
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	return s.Publish("orders.notified", []byte(id)) // corpus: dualwrite
}

// Corrected cases.

//corpus:negative
func (s *Service) PlaceThroughOutbox(ctx context.Context, o store.Order) error {
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if err := s.Repo.Save(ctx, tx, o); err != nil {
		return err
	}
	payload, _ := json.Marshal(o)
	if _, err := s.Outbox.EnqueueTx(ctx, tx, outbox.Event{Topic: "orders", Key: o.ID, Type: "order.placed", Payload: payload}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

//corpus:negative
func (s *Service) ChargeThroughOutbox(ctx context.Context, tok coord.Token, o store.Order) error {
	return pgfence.Exec(ctx, s.Pool, tok, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE orders SET charged = true WHERE id = $1`, o.ID); err != nil {
			return err
		}
		_, err := s.Outbox.EnqueueTx(ctx, tx, outbox.Event{Topic: "charges", Key: o.ID, Type: "order.charged", Payload: []byte(`{}`), JSON: true})
		return err
	})
}

//corpus:negative
func (s *Service) ReadThenAnnounce(ctx context.Context, id string) error {
	o, err := s.Repo.Get(ctx, id)
	if err != nil {
		return err
	}
	return s.placed(ctx, o)
}

//corpus:negative
func (s *Service) CommitThenCache(ctx context.Context, tx pgx.Tx, o store.Order) error {
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	return s.Cache.Set(ctx, "order:"+o.ID, o.Cents, 0).Err()
}

//corpus:negative
func (s *Service) AnnounceOnly(ctx context.Context, o store.Order) error {
	return s.placed(ctx, o)
}

//corpus:negative
func (s *Service) CommitOnly(ctx context.Context, tx pgx.Tx, o store.Order) error {
	if err := s.Repo.Save(ctx, tx, o); err != nil {
		return err
	}
	return s.Repo.Finish(ctx, tx)
}

//corpus:negative
func (s *Service) RollbackThenReport(ctx context.Context, tx pgx.Tx, id string) error {
	_ = tx.Rollback(ctx)
	return s.NC.Publish("orders.failed", []byte(id))
}

//corpus:negative
func (s *Service) PayIdempotently(ctx context.Context, key idempotency.Key, fp idempotency.Fingerprint, o store.Order) (idempotency.Result, error) {
	return s.Store.Do(ctx, key, fp, func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		if err := s.Repo.Save(ctx, tx, o); err != nil {
			return idempotency.Response{}, err
		}
		_, err := s.Outbox.EnqueueTx(ctx, tx, outbox.Event{Topic: "payments", Key: o.ID, Type: "payment.captured", Payload: []byte(o.ID)})
		return idempotency.Response{Status: 201}, err
	}, nil)
}
