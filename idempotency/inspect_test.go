package idempotency_test

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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

// A replay returns the stored headers byte for byte, also values that are not
// UTF-8 (obs-text such as a Latin-1 file name, which HTTP allows) or hold a NUL:
// nothing is silently turned into U+FFFD on the way through the key table.
func TestReplayKeepsHeaderBytes(t *testing.T) {
	s, db := newStore(t, idempotency.Config{})
	ctx := context.Background()
	want := http.Header{
		"Content-Disposition": {"attachment; filename=\"caf\xe9.txt\""},
		"X-Raw":               {"nul\x00byte", "cut \xe2\x82"},
		"Location":            {"/effects/ü"},
		"X-\xff":              {"name not UTF-8"},
	}
	key := idempotency.Key{Scope: "acme", ID: "raw-header"}
	for _, replay := range []bool{false, true} {
		res, err := s.Do(ctx, key, fp("a"), func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
			return idempotency.Response{Status: 200, Header: want, Body: []byte("x")}, nil
		}, nil)
		if err != nil || res.Replayed != replay {
			t.Fatalf("Do (replay %v): %+v, %v", replay, res, err)
		}
		if !reflect.DeepEqual(res.Response.Header, want) {
			t.Fatalf("Do (replay %v): header %q, want %q", replay, res.Response.Header, want)
		}
	}
	// Headers that are UTF-8 throughout are stored as readable JSON.
	plain := idempotency.Key{Scope: "acme", ID: "plain-header"}
	if _, err := s.Do(ctx, plain, fp("a"), effect(plain, "x"), nil); err != nil {
		t.Fatal(err)
	}
	var stored string
	if err := db.Pool.QueryRow(ctx, `SELECT convert_from(response_header, 'UTF8') FROM coord_idempotency_keys WHERE idem_key = $1`, plain.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != `{"Location":["/effects/plain-header"]}` {
		t.Fatalf("stored header %q, want the JSON object", stored)
	}
}
