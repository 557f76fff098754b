// Package invalid: an exception that is no exception silences nothing, so the
// rule applies again (RFC "Exceptions").
package invalid

import (
	"database/sql"

	"github.com/nats-io/nats.go"
)

func expired(tx *sql.Tx, nc *nats.Conn) error {
	_ = tx.Commit()
	//coordvet:ignore dualwrite owner=payments expires=2026-06-30 was due in June
	return nc.Publish("orders", nil) // want `dualwrite: expired commits`
}

func noOwner(tx *sql.Tx, nc *nats.Conn) error {
	_ = tx.Commit()
	//coordvet:ignore dualwrite cache invalidation only
	return nc.Publish("orders", nil) // want `dualwrite: noOwner commits`
}

func valid(tx *sql.Tx, nc *nats.Conn) error {
	_ = tx.Commit()
	//coordvet:ignore dualwrite owner=payments expires=2026-09-30 cache invalidation only
	return nc.Publish("orders", nil)
}
