package pgfence_test

import (
	"errors"
	"testing"

	"github.com/coordkit/coordkit/correctnesslease/pgfence"
)

func TestListGetAndResets(t *testing.T) {
	f, db, _ := newFence(t, pgfence.Config{})
	ctx := testCtx(t)
	for _, s := range []string{"/tenants/a/elections/x@7", "/tenants/a/elections/y@9", "/tenants/b/elections/x@3"} {
		if err := guard(ctx, f, db.Pool, tok(t, s)); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := f.FenceList(ctx, db.Pool, &pgfence.FenceListOpts{Prefix: "/tenants/a/"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Lease != "/tenants/a/elections/x" || rows[0].Revision != 7 || rows[1].Revision != 9 || rows[0].UpdatedAt.IsZero() {
		t.Fatalf("List(prefix a) = %+v", rows)
	}
	if all, err := f.FenceList(ctx, db.Pool, nil); err != nil || len(all) != 3 {
		t.Fatalf("List(nil) = %+v, %v", all, err)
	}
	if one, err := f.FenceList(ctx, db.Pool, &pgfence.FenceListOpts{Limit: 1}); err != nil || len(one) != 1 {
		t.Fatalf("List(limit 1) = %+v, %v", one, err)
	}
	if next, err := f.FenceList(ctx, db.Pool, &pgfence.FenceListOpts{After: rows[0].Lease, Limit: 1}); err != nil || len(next) != 1 || next[0].Lease != rows[1].Lease {
		t.Fatalf("FenceList(after %s, limit 1) = %+v, %v: want the next row", rows[0].Lease, next, err)
	}
	if _, err := f.FenceList(ctx, db.Pool, &pgfence.FenceListOpts{Limit: -1}); !errors.Is(err, pgfence.ErrInvalidConfig) {
		t.Fatalf("List(limit -1) = %v, want ErrInvalidConfig", err)
	}

	r, err := f.FenceGet(ctx, db.Pool, "/tenants/b/elections/x")
	if err != nil || r.Revision != 3 {
		t.Fatalf("FenceGet = %+v %v", r, err)
	}
	if _, err := f.FenceGet(ctx, db.Pool, "/tenants/b/elections/none"); !errors.Is(err, pgfence.ErrNotFound) {
		t.Fatalf("FenceGet(unknown) = %v, want ErrNotFound", err)
	}

	const lease = "/tenants/a/elections/x"
	for i, to := range []int64{5, 0} {
		expect := []int64{7, 5}[i]
		if _, err := f.FenceReset(ctx, db.Pool, lease, pgfence.ResetOpts{Actor: "op", Reason: "test", ExpectHighest: expect, To: to}); err != nil {
			t.Fatal(err)
		}
	}
	resets, err := f.ResetList(ctx, db.Pool, lease, &pgfence.ResetListOpts{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(resets) != 2 || resets[0].Before != 5 || resets[0].After != 0 || resets[1].Before != 7 || resets[1].After != 5 ||
		resets[0].Actor != "op" || resets[0].AuditID <= resets[1].AuditID || resets[0].At.IsZero() {
		t.Fatalf("Resets = %+v", resets)
	}
	if _, err := f.ResetList(ctx, db.Pool, lease, &pgfence.ResetListOpts{Limit: -1}); !errors.Is(err, pgfence.ErrInvalidConfig) {
		t.Fatalf("ResetList(limit -1) = %v, want ErrInvalidConfig", err)
	}
}
