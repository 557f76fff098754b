// Package relay stands for the outbox relay: it may commit and publish (exempt).
package relay

import (
	"database/sql"

	"github.com/nats-io/nats.go"
)

func publishClaimed(tx *sql.Tx, nc *nats.Conn) error {
	if err := nc.Publish("orders", nil); err != nil {
		return err
	}
	return tx.Commit()
}
