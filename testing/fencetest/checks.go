package fencetest

import (
	"context"
	"errors"
	"fmt"

	"github.com/coordkit/coordkit/coord"
)

func mustAccept(ctx context.Context, r Resource, tok coord.Token, key, value, why string) error {
	if err := r.Write(ctx, tok, key, value); err != nil {
		return fmt.Errorf("fencetest: %s: write %q with %s: %v (want accepted)", why, value, tok, err)
	}
	return nil
}

func mustReject(ctx context.Context, r Resource, tok coord.Token, key, value, why string) error {
	err := r.Write(ctx, tok, key, value)
	if !errors.Is(err, coord.ErrStaleToken) {
		return fmt.Errorf("fencetest: %s: write %q with %s returned %v, want an error matching coord.ErrStaleToken", why, value, tok, err)
	}
	return nil
}

func mustRead(ctx context.Context, r Resource, key, want, why string) error {
	got, ok, err := r.Read(ctx, key)
	if err != nil {
		return fmt.Errorf("fencetest: %s: read %q: %v", why, key, err)
	}
	if !ok || got != want {
		return fmt.Errorf("fencetest: %s: read %q = %q (found %v), want %q", why, key, got, ok, want)
	}
	return nil
}

// checkStale: after a newer token wrote, the older one is refused and its value
// never shows.
func checkStale(ctx context.Context, k *kit, r Resource, name string) error {
	toks, err := k.tokens(ctx, name, 2)
	if err != nil {
		return err
	}
	old, cur := toks[0], toks[1]
	if err := mustAccept(ctx, r, cur, name, "new", "stale check"); err != nil {
		return err
	}
	if err := mustReject(ctx, r, old, name, "stale", "older token after a newer one wrote"); err != nil {
		return err
	}
	return mustRead(ctx, r, name, "new", "after a rejected stale write")
}

// checkEqual: a holder writes repeatedly with its one token.
func checkEqual(ctx context.Context, k *kit, r Resource, name string) error {
	toks, err := k.tokens(ctx, name, 1)
	if err != nil {
		return err
	}
	for i := 0; i < 3; i++ {
		v := fmt.Sprintf("write %d", i)
		if err := mustAccept(ctx, r, toks[0], name, v, "same token again"); err != nil {
			return err
		}
		if err := mustRead(ctx, r, name, v, "after a write with the same token"); err != nil {
			return err
		}
	}
	return nil
}

// checkNewer: each successor's token is accepted over its predecessor's.
func checkNewer(ctx context.Context, k *kit, r Resource, name string) error {
	toks, err := k.tokens(ctx, name, 3)
	if err != nil {
		return err
	}
	for i, tok := range toks {
		v := fmt.Sprintf("holder %d", i)
		if err := mustAccept(ctx, r, tok, name, v, "newer token"); err != nil {
			return err
		}
		if err := mustRead(ctx, r, name, v, "after a newer token wrote"); err != nil {
			return err
		}
	}
	return nil
}
