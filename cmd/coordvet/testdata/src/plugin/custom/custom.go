package custom

import (
	"database/sql"

	"example.com/bus"
)

// Through the plugin the message does not repeat the check's name: golangci-lint
// prints it already.
func inHouse(tx *sql.Tx, c *bus.Client) error {
	_ = tx.Commit()
	return c.Send("orders", nil) // want `^inHouse commits \(sql.Tx.Commit, line 12\) and publishes \(bus.Client.Send\)`
}
