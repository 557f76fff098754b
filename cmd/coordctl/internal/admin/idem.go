package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/coordkit/coordkit/idempotency"
)

// IdemKey is one idempotency key's stored state.
type IdemKey struct {
	Scope          string      `json:"scope"`
	Key            string      `json:"key"`
	State          string      `json:"state"` // completed or in_progress
	Fingerprint    string      `json:"fingerprint"`
	Operation      string      `json:"operation"`
	RecoveryPoint  string      `json:"recovery_point"`
	LockedUntil    *time.Time  `json:"locked_until"`
	ResponseStatus int         `json:"response_status"`
	ResponseHeader http.Header `json:"response_header"`
	ResponseBytes  int         `json:"response_bytes"`
	CreatedAt      time.Time   `json:"created_at"`
	CompletedAt    *time.Time  `json:"completed_at"`
	ExpiresAt      time.Time   `json:"expires_at,omitzero"`
}

// ErrNotFound is an object that does not exist.
var ErrNotFound = errors.New("coordctl: not found")

// Idem returns one key's state.
func (a *Admin) Idem(ctx context.Context, scope, key string) (IdemKey, error) {
	if err := checkID("idempotency scope", scope); err != nil {
		return IdemKey{}, err
	}
	if err := checkID("idempotency key", key); err != nil {
		return IdemKey{}, err
	}
	s, err := a.idempotency(ctx)
	if err != nil {
		return IdemKey{}, err
	}
	st, err := s.KeyGet(ctx, idempotency.Key{Scope: scope, ID: key})
	if errors.Is(err, idempotency.ErrNotFound) {
		return IdemKey{}, fmt.Errorf("%w: idempotency key %s", ErrNotFound, idempotency.Key{Scope: scope, ID: key})
	}
	if err != nil {
		return IdemKey{}, err
	}
	k := IdemKey{Scope: scope, Key: key, State: "in_progress", Fingerprint: st.Fingerprint, Operation: st.Operation,
		RecoveryPoint: st.RecoveryPoint, LockedUntil: st.LockedUntil, ResponseStatus: st.ResponseStatus,
		ResponseHeader: st.ResponseHeader, ResponseBytes: st.ResponseBytes, CreatedAt: st.CreatedAt,
		CompletedAt: st.CompletedAt, ExpiresAt: st.ExpiresAt}
	if st.Completed {
		k.State = "completed"
	}
	return k, nil
}
