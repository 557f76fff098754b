// Package schedule is a stub of github.com/coordkit/coordkit/schedule.
package schedule

import (
	"context"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/jackc/pgx/v5"
)

type ID struct {
	Tenant, Job string
	Local       time.Time
	Fold        int
}

func (id ID) Key() string    { return "" }
func (id ID) String() string { return "" }

type Fire struct {
	ID
	Nominal time.Time
	Token   coord.Token
	Attempt int
}

type Handler func(ctx context.Context, tx pgx.Tx, f *Fire) error

type Job struct {
	Name    string
	Cron    string
	Handler Handler
}
