package saga

import (
	"context"

	"github.com/coordkit/coordkit/internal/pgschema"
)

// MigrateOpts names the tables the deprecated Migrate creates. A nil *MigrateOpts
// uses the defaults.
//
// Deprecated: use Client.Migrate and Barrier.Migrate, whose Configs name the
// tables; MigrateOpts goes in v0.2.0.
type MigrateOpts struct {
	Table        string // the saga table; default DefaultTable
	BarrierTable string // the barrier table; default DefaultBarrierTable; "-" skips it
}

// Migrate brings the saga table and (unless opts.BarrierTable is "-") the barrier
// table, in the search_path's schema, to the newest schema version, each as its
// Migrate does: it blocks while another caller migrates the same schema; ctx
// cancels it. Invalid names are a *ConfigError before anything is sent.
//
// Deprecated: use client.Migrate(ctx, db) and barrier.Migrate(ctx, db) (or
// MigrationSQL for your own tool); the package-level Migrate goes in v0.2.0.
func Migrate(ctx context.Context, db Beginner, opts *MigrateOpts) error {
	var o MigrateOpts
	if opts != nil {
		o = *opts
	}
	if o.Table == "" {
		o.Table = DefaultTable
	}
	if ne := pgschema.CheckTable("", o.Table, dueIdx, stateIdx, noCompCheck, dueChannel); ne != nil {
		return nameError(ne)
	}
	sc, err := sagaComponent("", o.Table)
	if err != nil {
		return err
	}
	if err := sc.Migrate(ctx, db); err != nil {
		return err
	}
	if o.BarrierTable == "-" {
		return nil
	}
	b, err := NewBarrier(BarrierConfig{Table: o.BarrierTable})
	if err != nil {
		return err
	}
	return b.Migrate(ctx, db)
}
