package efficiencylock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordkit/coord"
)

// Locker acquires efficiency locks in one tenant's namespace of one Redis. It holds
// no goroutines and no connections of its own, and is safe for concurrent use.
type Locker struct {
	client Client
	why    Reason
	cfg    Config
	in     *instruments
	log    *slog.Logger
}

// New returns a Locker over client. why must come from DuplicatesHarmless with a
// non-empty reason: New returns a *ReasonError (ErrInvalidReason) otherwise, and a
// *ConfigError (ErrInvalidConfig) for a nil client or an invalid Config.Tenant
// (unwrapping to the *coord.NameError). It does not contact Redis and does not
// block.
func New(client Client, why Reason, cfg Config) (*Locker, error) {
	if client == nil {
		return nil, &ConfigError{Field: "client", Reason: "nil"}
	}
	if err := why.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Locker{
		client: client,
		why:    why,
		cfg:    cfg,
		in:     newInstruments(cfg.MeterProvider, why, cfg.Tenant),
		log:    cfg.Logger.With(slog.String(attrWhy, why.String()), slog.String(coord.AttrTenant, cfg.Tenant)),
	}, nil
}

// Reason returns the declared reason why duplicates are harmless.
func (l *Locker) Reason() Reason { return l.why }

// Key returns the Redis key of the lock called name:
// /tenants/{tenant}/locks/{name}. Errors match coord.ErrInvalidName.
func (l *Locker) Key(name string) (string, error) {
	return coord.Key(l.cfg.Tenant, coord.KindLocks, name)
}

// TryAcquire makes one attempt to take the lock called name for ttl: one SET NX PX
// round trip, blocking at most until ctx ends (or the client's timeouts). opts may
// be nil (the Config's AutoRefresh). It returns the guard on success; a
// *NotAcquiredError (ErrNotAcquired) when someone else holds the lock; the
// context's error, wrapped, when ctx is already done; a coord.ErrInvalidName error
// for an invalid name; a *TTLError for ttl < 1 ms; and the Redis error, wrapped,
// otherwise. If the reply to a SET that succeeded is lost, the key is left to
// expire after ttl.
func (l *Locker) TryAcquire(ctx context.Context, name string, ttl time.Duration, opts *LockOpts) (*Lock, error) {
	return l.acquire(ctx, name, ttl, NoRetry(), opts)
}

// Acquire takes the lock called name for ttl, retrying while someone else holds it
// (or Redis is unreachable) according to opts.Retry (nil opts or nil Retry: the
// Config's). It blocks until it acquires, the strategy gives up (a
// *NotAcquiredError, ErrNotAcquired), or ctx ends: then it returns
// errors.Join(*NotAcquiredError, context.Cause(ctx)) if at least one attempt found
// the lock held, or the wrapped context error if none did. Invalid input fails at
// once as in TryAcquire.
func (l *Locker) Acquire(ctx context.Context, name string, ttl time.Duration, opts *LockOpts) (*Lock, error) {
	retry := l.cfg.Retry
	if opts != nil && opts.Retry != nil {
		retry = opts.Retry
	}
	return l.acquire(ctx, name, ttl, retry, opts)
}

func (l *Locker) acquire(ctx context.Context, name string, ttl time.Duration, retry RetryStrategy, opts *LockOpts) (*Lock, error) {
	key, err := l.Key(name)
	if err != nil {
		return nil, fmt.Errorf("efficiencylock: acquire: %w", err)
	}
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("efficiencylock: acquire %q: %w", name, context.Cause(ctx))
	}
	value, err := newValue()
	if err != nil {
		return nil, fmt.Errorf("efficiencylock: acquire %q: random value: %w", name, err)
	}
	held := 0      // attempts that found the lock held by someone else
	var last error // last transport error
	for attempt := 0; ; attempt++ {
		sent := time.Now()
		ok, err := l.client.SetNX(ctx, key, value, ttl).Result()
		switch {
		case err == nil && ok:
			l.in.acquisition(ctx, l.in.acquired, attempt+1)
			lk := newLock(ctx, l, name, key, value, ttl, sent, l.autoRefresh(opts))
			if l.log.Enabled(ctx, slog.LevelDebug) {
				l.log.DebugContext(ctx, "efficiencylock: acquired", slog.String("lock", name), slog.Duration("ttl", ttl), slog.Int("attempts", attempt+1))
			}
			return lk, nil
		case err == nil:
			held++
		case ctx.Err() != nil:
			// The context ended during the attempt; reported below.
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				last = err
			}
		case isServerError(err):
			l.in.acquisition(ctx, l.in.acqError, attempt+1)
			return nil, fmt.Errorf("efficiencylock: acquire %q: %w", name, err)
		default:
			last = err
		}
		if ctx.Err() == nil {
			if d, again := retry.NextBackoff(attempt); again {
				if waitErr := wait(ctx, d); waitErr == nil {
					continue
				}
			} else if held > 0 {
				l.in.acquisition(ctx, l.in.notAcquired, attempt+1)
				return nil, &NotAcquiredError{Name: name, Attempts: attempt + 1, Err: last}
			} else {
				l.in.acquisition(ctx, l.in.acqError, attempt+1)
				return nil, fmt.Errorf("efficiencylock: acquire %q: %w", name, last)
			}
		}
		// The context ended.
		cause := fmt.Errorf("efficiencylock: acquire %q: %w", name, context.Cause(ctx))
		if last != nil {
			cause = fmt.Errorf("efficiencylock: acquire %q: %w (last attempt: %w)", name, context.Cause(ctx), last)
		}
		if held > 0 {
			l.in.acquisition(ctx, l.in.notAcquired, attempt+1)
			return nil, errors.Join(&NotAcquiredError{Name: name, Attempts: attempt + 1, Err: last}, cause)
		}
		l.in.acquisition(ctx, l.in.acqError, attempt+1)
		return nil, cause
	}
}

func (l *Locker) autoRefresh(opts *LockOpts) bool {
	if opts != nil && opts.AutoRefresh != nil {
		return *opts.AutoRefresh
	}
	return l.cfg.AutoRefresh
}

// isServerError reports an error reply from Redis (WRONGTYPE, NOPERM, READONLY…),
// which retrying the same command will not cure, as opposed to a transport error.
func isServerError(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !redis.HasErrorPrefix(err, "LOADING") && !redis.HasErrorPrefix(err, "READONLY") &&
		!redis.HasErrorPrefix(err, "MASTERDOWN") && !redis.HasErrorPrefix(err, "TRYAGAIN") && !redis.HasErrorPrefix(err, "CLUSTERDOWN")
}

// newValue returns 16 random bytes from crypto/rand, base64-encoded: the value that
// identifies one acquisition.
func newValue() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// wait sleeps d or until ctx ends, returning the context's cause then.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
