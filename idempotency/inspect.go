package idempotency

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
)

// KeyState is one stored key as an operator sees it (coordctl idem get): its
// state and the metadata of its stored response, never the body itself.
type KeyState struct {
	Key           Key
	Completed     bool   // false: in progress
	Fingerprint   string // hex SHA-256 of the canonical request
	Operation     string // the phased operation; "" for a one-shot key
	RecoveryPoint string // the last committed phase ("started" for a one-shot key)
	// LockedUntil is when an in-progress key's lock ends (a phased operation's
	// owner or the completer then may resume it); nil when none is held.
	LockedUntil    *time.Time
	ResponseStatus int         // the stored status (0 when none)
	ResponseHeader http.Header // the stored headers
	ResponseBytes  int         // length of the stored body
	CreatedAt      time.Time
	UpdatedAt      time.Time
	CompletedAt    *time.Time
	// ExpiresAt is when the Pruner may delete a completed key (CreatedAt +
	// Config.Retention); zero while it is in progress.
	ExpiresAt time.Time
}

// KeyGet returns the stored state of key without fingerprint checks, locks or
// replays: the operator's view (coordctl idem get). It returns an error matching
// ErrNotFound for an unknown (or pruned) key and a *KeyError for an invalid one.
// It is read-only: one query, which ctx cancels.
func (s *Store) KeyGet(ctx context.Context, key Key) (KeyState, error) {
	st, ok, err := s.inspect(ctx, key)
	if err == nil && !ok {
		return KeyState{}, fmt.Errorf("%w: key %s", ErrNotFound, key)
	}
	return st, err
}

// Inspect returns the stored state of key without fingerprint checks, locks or
// replays; ok is false for an unknown key. It is read-only: one query, which ctx
// cancels. An invalid key returns a *KeyError.
//
// Deprecated: use KeyGet, whose unknown key is an error matching ErrNotFound.
func (s *Store) Inspect(ctx context.Context, key Key) (st KeyState, ok bool, err error) {
	return s.inspect(ctx, key)
}

func (s *Store) inspect(ctx context.Context, key Key) (st KeyState, ok bool, err error) {
	if err := key.Validate(); err != nil {
		return KeyState{}, false, err
	}
	var fp, header []byte
	var status int16
	var respStatus *int32
	st.Key = key
	err = s.pool.QueryRow(ctx, `SELECT fingerprint, status, operation, recovery_point, locked_until, response_status,
		response_header, coalesce(length(response_body), 0), created_at, updated_at, completed_at
		FROM `+s.table+` WHERE scope = $1 AND idem_key = $2`, key.Scope, key.ID).Scan(
		&fp, &status, &st.Operation, &st.RecoveryPoint, &st.LockedUntil, &respStatus,
		&header, &st.ResponseBytes, &st.CreatedAt, &st.UpdatedAt, &st.CompletedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return KeyState{}, false, nil
	}
	if err != nil {
		return KeyState{}, false, fmt.Errorf("idempotency: inspect %s: %w", key, err)
	}
	st.Fingerprint = hex.EncodeToString(fp)
	st.Completed = status == statusCompleted
	if respStatus != nil {
		st.ResponseStatus = int(*respStatus)
	}
	if st.ResponseHeader, err = decodeHeader(header); err != nil {
		return KeyState{}, false, err
	}
	if st.Completed {
		st.ExpiresAt = st.CreatedAt.Add(s.cfg.Retention)
	}
	return st, true, nil
}
