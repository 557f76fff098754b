// Package app is the inventory fixture: a little of everything the RFC's
// success metrics count.
package app

import (
	"context"
	"net/http"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/efficiencylock"
	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/idempotency/httpidem"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/saga"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
)

type App struct {
	Session *correctnesslease.Session
	Pool    *pgxpool.Pool
	Redis   *redis.Client
	NC      *nats.Conn
	Outbox  *outbox.Outbox
	Store   *idempotency.Store
}

func (a *App) Fenced(ctx context.Context) error {
	lease, err := correctnesslease.Acquire(ctx, a.Session, "billing")
	if err != nil {
		return err
	}
	return pgfence.Exec(ctx, a.Pool, lease.Token(), func(ctx context.Context, tx pgx.Tx) error { return nil })
}

func (a *App) Unfenced(ctx context.Context) error {
	lease, err := correctnesslease.Acquire(ctx, a.Session, "reports")
	if err != nil {
		return err
	}
	return lease.Release(ctx)
}

func (a *App) Loop(ctx context.Context) error {
	return correctnesslease.Run(ctx, a.Session, "compactor", func(ctx context.Context, tok coord.Token) error {
		return pgfence.Exec(ctx, a.Pool, tok, func(ctx context.Context, tx pgx.Tx) error { return nil })
	}, nil)
}

func (a *App) Locks() {
	_, _ = efficiencylock.New(a.Redis, efficiencylock.DuplicatesHarmless("cache warm-up rewrites the same keys"), zeroOf3(efficiencylock.New))
	_, _ = efficiencylock.New(a.Redis, efficiencylock.DuplicatesHarmless(time.Now().String()), zeroOf3(efficiencylock.New))
}

func (a *App) HandRolled(ctx context.Context) bool {
	ok, _ := a.Redis.SetNX(ctx, "lock:nightly", "me", time.Minute).Result()
	return ok
}

func (a *App) DualWrite(ctx context.Context, tx pgx.Tx) error {
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	return a.NC.Publish("orders", nil)
}

func (a *App) Enqueue(ctx context.Context, tx pgx.Tx) error {
	if _, err := a.Outbox.EnqueueTx(ctx, tx, outbox.Event{Topic: "orders", Key: "o-1", Type: "order.placed", Payload: []byte("{}")}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (a *App) Routes(mux *http.ServeMux, cfg httpidem.Config) error {
	idem, err := httpidem.Middleware(a.Store, cfg)
	if err != nil {
		return err
	}
	mux.Handle("POST /payments", idem(http.HandlerFunc(a.pay)))
	mux.HandleFunc("POST /refunds", a.refund)
	mux.HandleFunc("GET /orders", func(w http.ResponseWriter, r *http.Request) {})
	return nil
}

func (a *App) pay(w http.ResponseWriter, r *http.Request)    { w.WriteHeader(http.StatusCreated) }
func (a *App) refund(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }

// UnimplementedOrdersServer stands for protoc-gen-go-grpc's embedding type.
type UnimplementedOrdersServer struct{}

type CreateOrderRequest struct{ ID string }
type CreateOrderResponse struct{}

type OrdersServer struct {
	UnimplementedOrdersServer
	App *App
}

func (s *OrdersServer) CreateOrder(ctx context.Context, req *CreateOrderRequest) (*CreateOrderResponse, error) {
	_, err := s.App.Pool.Exec(ctx, `INSERT INTO orders (id) VALUES ($1)`, req.ID)
	return &CreateOrderResponse{}, err
}

func (s *OrdersServer) GetOrder(ctx context.Context, req *CreateOrderRequest) (*CreateOrderResponse, error) {
	return &CreateOrderResponse{}, nil
}

type Order struct{}

func step(ctx context.Context, sc saga.StepContext, o *Order) error { return nil }

func Sagas() {
	_, _ = saga.New("order", saga.Compensatable("reserve", step, step), saga.Pivot("charge", step), saga.Retriable("ship", step))
	_, _ = saga.New("legacy", saga.Compensatable("reserve", step, step), saga.Retriable("ship", step))
}

func Exceptions(ctx context.Context, tx pgx.Tx, nc *nats.Conn) {
	_ = tx.Commit(ctx)
	//coordvet:ignore dualwrite owner=search expires=2026-09-30 best-effort cache invalidation
	_ = nc.Publish("cache.invalidate", nil)
	//coordvet:ignore dualwrite owner=search expires=2026-06-30 expired already
	_ = nc.Publish("cache.invalidate", nil)
	//coordvet:ignore dualwrite owner=payments expires=2026-08-15 reviewed in PAY-7
	_ = nc.Publish("payments.mirror", nil)
}

func IsUnset(tok coord.Token) bool { return tok == coord.Token{} }

func Fixed(ctx context.Context, tx pgx.Tx) error {
	//coordvet:ignore dualwrite owner=search expires=2026-09-30 the dual write was fixed
	return tx.Commit(ctx)
}

// zeroOf3 is the zero value of f's third parameter: the fixture compiles
// whatever shape efficiencylock's options take.
func zeroOf3[A, B, C, R1, R2 any](f func(A, B, C) (R1, R2)) (zero C) { return zero }
