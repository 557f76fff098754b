package nolint // want `^line 12: silenced commits .*\[//nolint does not silence coordvet; use //coordvet:ignore\]` `^line 19: silencedAbove commits`

import (
	"database/sql"

	"github.com/nats-io/nats.go"
)

func silenced(tx *sql.Tx, nc *nats.Conn) error {
	_ = tx.Commit()
	//nolint:coordvet // the plugin honours only //coordvet:ignore
	return nc.Publish("orders", nil)
}

//nolint:all
func silencedAbove(tx *sql.Tx, nc *nats.Conn) error {
	_ = tx.Commit()

	return nc.Publish("orders", nil)
}

func notCovered(tx *sql.Tx, nc *nats.Conn) error {
	_ = tx.Commit()
	//nolint:errcheck
	return nc.Publish("orders", nil) // want `^notCovered commits`
}
