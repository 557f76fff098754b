package bad

import (
	"database/sql"
	"testing"

	"github.com/nats-io/nats.go"
)

func TestHelper(t *testing.T) {
	var tx *sql.Tx
	var nc *nats.Conn
	_ = tx.Commit()
	_ = nc.Publish("orders", nil) // want `TestHelper commits`
}
