package pgfence

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
)

// The package-level functions are the methods of the Fence of the zero Config
// (table "coord_fences" on the search_path, otel.GetMeterProvider(),
// slog.Default()), built for each call: the package keeps no Fence (no
// package-level state, docs/architecture.md). Building one costs about 80 µs
// (New loads the schema), so a hot path keeps the *Fence New returns.

// std builds the Fence of the zero Config, which is always valid.
func std() *Fence {
	f, err := New(Config{})
	if err != nil {
		panic("pgfence: the zero Config is invalid: " + err.Error())
	}
	return f
}

// Migrate is Fence.Migrate with the default Config (table "coord_fences").
func Migrate(ctx context.Context, db Beginner) error { return std().Migrate(ctx, db) }

// MigrateTx is Fence.MigrateTx with the default Config (table "coord_fences").
func MigrateTx(ctx context.Context, tx pgx.Tx) error { return std().MigrateTx(ctx, tx) }

// MigrationSQL is Fence.MigrationSQL with the default Config (table "coord_fences").
func MigrationSQL() []string { return std().MigrationSQL() }

// GuardTx is Fence.GuardTx with the default Config (table "coord_fences"): it
// records tok, locks the lease's fence row until tx ends, and returns a
// *coord.StaleTokenError when a newer token was recorded. See Fence.GuardTx.
func GuardTx(ctx context.Context, tx pgx.Tx, tok coord.Token) error {
	return std().GuardTx(ctx, tx, tok)
}

// Exec is Fence.Exec with the default Config (table "coord_fences"): begin,
// GuardTx, fn, commit. See Fence.Exec.
func Exec(ctx context.Context, db Beginner, tok coord.Token, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return std().Exec(ctx, db, tok, fn)
}

// FenceReset is Fence.FenceReset with the default Config (table "coord_fences"):
// the audited, compare-and-set reset of one lease's fence row. See
// Fence.FenceReset.
func FenceReset(ctx context.Context, db Beginner, lease string, opts ResetOpts) (ResetResult, error) {
	return std().FenceReset(ctx, db, lease, opts)
}

// ResetFence is FenceReset.
//
// Deprecated: use FenceReset.
func ResetFence(ctx context.Context, db Beginner, lease string, opts ResetOpts) (ResetResult, error) {
	return std().FenceReset(ctx, db, lease, opts)
}
