package custom

import (
	"database/sql"

	"example.com/bus"
)

func inHouse(tx *sql.Tx, c *bus.Client) error {
	_ = tx.Commit()
	return c.Send("orders", nil) // want `dualwrite: inHouse commits \(sql.Tx.Commit, line 10\) and publishes \(bus.Client.Send\)`
}
