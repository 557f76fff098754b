package facts

import (
	"context"

	"dualwrite/deephelp"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
)

func place(ctx context.Context, tx pgx.Tx, nc *nats.Conn) error {
	if err := deephelp.Save(ctx, tx); err != nil {
		return err
	}
	return deephelp.Announce(nc, "o-1") // want `^place commits \(Save → commit → pgx.Tx.Commit, line 13\) and publishes \(Announce → nats.Conn.Publish\)`
}
