// Package exceptions holds every form of //coordvet:ignore the RFC's
// exception rule knows (judged on 2026-07-01, the corpus test's -today).
package exceptions

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
)

// Valid: an owner, an expiry within two quarters, a reason. Silenced.
//
//corpus:negative
func Valid(ctx context.Context, tx pgx.Tx, nc *nats.Conn) error {
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	//coordvet:ignore dualwrite owner=search expires=2026-09-30 best-effort cache invalidation; readers re-read the row
	return nc.Publish("cache.invalidate", nil)
}

// Trailing: the directive at the end of the line. Silenced.
//
//corpus:negative
func Trailing(ctx context.Context, tx pgx.Tx, nc *nats.Conn) error {
	_ = tx.Commit(ctx)
	return nc.Publish("cache.invalidate", nil) //coordvet:ignore dualwrite owner=search expires=2026-12-31 cache invalidation
}

// Expired: no exception any more; the rule applies again.
func Expired(ctx context.Context, tx pgx.Tx, nc *nats.Conn) error {
	_ = tx.Commit(ctx)
	//coordvet:ignore dualwrite owner=search expires=2026-06-30 migration to the outbox was due in June // corpus: ignoredirective
	return nc.Publish("cache.invalidate", nil) // corpus: dualwrite
}

// NoOwner: the pre-RFC form.
func NoOwner(ctx context.Context, tx pgx.Tx, nc *nats.Conn) error {
	_ = tx.Commit(ctx)
	//coordvet:ignore dualwrite best-effort cache invalidation // corpus: ignoredirective
	return nc.Publish("cache.invalidate", nil) // corpus: dualwrite
}

// TooFar: more than two quarters ahead.
func TooFar(ctx context.Context, tx pgx.Tx, nc *nats.Conn) error {
	_ = tx.Commit(ctx)
	//coordvet:ignore dualwrite owner=search expires=2027-06-30 granted for a year // corpus: ignoredirective
	return nc.Publish("cache.invalidate", nil) // corpus: dualwrite
}

// Typo: an unknown check name.
func Typo(ctx context.Context, tx pgx.Tx, nc *nats.Conn) error {
	_ = tx.Commit(ctx)
	//coordvet:ignore dualwrites owner=search expires=2026-09-30 cache invalidation // corpus: ignoredirective
	return nc.Publish("cache.invalidate", nil) // corpus: dualwrite
}

// Unused: the dual write was fixed, the exception stayed.
func Unused(ctx context.Context, tx pgx.Tx) error {
	//coordvet:ignore dualwrite owner=search expires=2026-09-30 left over // corpus: dualwrite
	return tx.Commit(ctx)
}
