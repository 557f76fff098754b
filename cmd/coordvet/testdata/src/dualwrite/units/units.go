package units

import (
	"context"
	"database/sql"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
)

// Two unrelated handler closures: one commits, one publishes. Each literal is
// its own unit: no dual write.
func Routes(mux *http.ServeMux, db *sql.DB, nc *nats.Conn) {
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		tx, _ := db.Begin()
		_ = tx.Commit()
	})
	mux.HandleFunc("POST /ping", func(w http.ResponseWriter, r *http.Request) {
		_ = nc.Publish("ping", nil)
	})
}

// One handler closure that does both is a dual write of its own.
func Route(mux *http.ServeMux, db *sql.DB, nc *nats.Conn) {
	mux.HandleFunc("POST /pay", func(w http.ResponseWriter, r *http.Request) {
		tx, _ := db.Begin()
		_ = tx.Commit()
		_ = nc.Publish("paid", nil) // want `the function literal at line 27 commits \(sql.Tx.Commit, line 29\)`
	})
}

// A transaction callback joins the enclosing unit: publish, then BeginFunc
// commits.
func InCallback(ctx context.Context, pool *pgxpool.Pool, nc *nats.Conn) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return nc.Publish("orders", nil) // want `InCallback commits \(pgx.BeginFunc, line 37\)`
	})
}

// A deferred closure is called where it stands: it joins.
func Deferred(ctx context.Context, tx pgx.Tx, nc *nats.Conn) (err error) {
	defer func() {
		if err == nil {
			err = tx.Commit(ctx)
		}
	}()
	return nc.Publish("orders", nil) // want `Deferred commits \(pgx.Tx.Commit, line 46\)`
}

// A goroutine for later, given to an unknown function, is its own unit.
func Later(tx *sql.Tx, nc *nats.Conn, schedule func(func())) error {
	schedule(func() { _ = nc.Publish("later", nil) })
	return tx.Commit()
}
