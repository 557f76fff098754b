package idempotency_test

import (
	"context"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/coordkit/coordkit/idempotency"
)

func TestKeyGet(t *testing.T) {
	s, _ := newStore(t, idempotency.Config{})
	ctx := context.Background()
	key := idempotency.Key{Scope: "acme", ID: "inspect-1"}
	if _, err := s.KeyGet(ctx, key); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("KeyGet(unknown) = %v, want ErrNotFound", err)
	}
	res, err := s.Do(ctx, key, fp("req"), effect(key, "first"), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.KeyGet(ctx, key)
	if err != nil {
		t.Fatalf("KeyGet = %v", err)
	}
	want := fp("req")
	if !st.Completed || st.Key != key || st.ResponseStatus != 201 || st.ResponseHeader.Get("Location") != "/effects/inspect-1" ||
		st.ResponseBytes != len(res.Response.Body) || st.Operation != "" || st.CompletedAt == nil || st.LockedUntil != nil {
		t.Fatalf("Inspect = %+v", st)
	}
	if st.Fingerprint != hex.EncodeToString(want[:]) {
		t.Fatalf("fingerprint %s, want %x", st.Fingerprint, want)
	}
	if d := st.ExpiresAt.Sub(st.CreatedAt); d != idempotency.DefaultRetention {
		t.Fatalf("ExpiresAt - CreatedAt = %v, want the retention %v", d, idempotency.DefaultRetention)
	}
	if time.Since(st.CreatedAt) > time.Minute {
		t.Fatalf("CreatedAt %v", st.CreatedAt)
	}
	if _, err := s.KeyGet(ctx, idempotency.Key{Scope: "acme", ID: "bad\x00"}); !errors.Is(err, idempotency.ErrInvalidKey) {
		t.Fatalf("Inspect(invalid) = %v, want ErrInvalidKey", err)
	}
}
