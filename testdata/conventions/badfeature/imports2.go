package badfeature

import (
	"github.com/jackc/pgx/v5/pgconn"

	"context"
)

var _ = func(context.Context) pgconn.CommandTag { return pgconn.CommandTag{} }
