package badfeature

import (
	"context"
	"errors"
	"time"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// Config configures a Store.
type Config struct {
	// Timeout bounds a call. Default 30 s.
	Timeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	return c
}

func (c Config) validate() error {
	if c.Timeout < 0 {
		return errors.New("badfeature: negative Timeout")
	}
	return nil
}

// Store has a schema but only two of the three migration functions.
type Store struct {
	out *outbox.Outbox
	db  *coordtest.PostgresDB
}

// New validates before it defaults.
func New(cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Store{}, nil
}

// Migrate creates the table.
func (s *Store) Migrate(ctx context.Context) error { return nil }

// MigrateTx creates the table in a transaction.
func (s *Store) MigrateTx(ctx context.Context) error { return nil }

func Undocumented() {}
