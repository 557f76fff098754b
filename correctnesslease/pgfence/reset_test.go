package pgfence_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/testing/coordtest"
)

const forgedMax = "9223372036854775807"

// auditRows returns the audit table's rows as "lease actor reason before after".
func auditRows(t *testing.T, db *pgxpool.Pool) []string {
	t.Helper()
	return coordtest.TextRows(t, db, `SELECT lease || ' ' || actor || ' ' || reason || ' ' || revision_before || ' ' || revision_after
		|| ' ' || (db_user <> '') || ' ' || (reset_at <= now()) FROM coord_fences_audit ORDER BY id`)
}

// TestForgedTokenFencesOutUntilReset is the threat the fence table cannot stop by
// itself: tokens are not authenticated, so a writer that can reach the table
// presents …@9223372036854775807 and every real holder is stale for good. The
// operator's way out is ResetFence: compare-and-set on the revision the operator
// saw, audited (who, why, before, after) and logged; afterwards the real holder
// writes again.
func TestForgedTokenFencesOutUntilReset(t *testing.T) {
	var logs bytes.Buffer
	f, db, _ := newFence(t, pgfence.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := testCtx(t)
	const lease = "/tenants/acme/elections/billing"
	if err := guard(ctx, f, db.Pool, tok(t, lease+"@100")); err != nil {
		t.Fatal(err)
	}
	if err := guard(ctx, f, db.Pool, tok(t, lease+"@"+forgedMax)); err != nil {
		t.Fatalf("the forged token was refused: %v", err)
	}
	if err := guard(ctx, f, db.Pool, tok(t, lease+"@101")); !errors.Is(err, coord.ErrStaleToken) {
		t.Fatalf("real holder after the forged token = %v, want stale", err)
	}
	highest, err := f.Highest(ctx, db.Pool, lease)
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.FenceReset(ctx, db.Pool, lease, pgfence.ResetOpts{Actor: "alice@ops", Reason: "INC-42: forged token\nfrom a test box", ExpectHighest: highest})
	if err != nil {
		t.Fatal(err)
	}
	if r.Lease != lease || r.Before != highest || r.After != 0 || r.AuditID == 0 || r.At.IsZero() || r.Actor != "alice@ops" {
		t.Fatalf("ResetResult %+v", r)
	}
	if h, _ := f.Highest(ctx, db.Pool, lease); h != 0 {
		t.Fatalf("highest after the reset %d, want 0 (no row)", h)
	}
	if err := guard(ctx, f, db.Pool, tok(t, lease+"@101")); err != nil {
		t.Fatalf("real holder after the reset: %v", err)
	}
	want := []string{lease + " alice@ops INC-42: forged token\nfrom a test box " + forgedMax + " 0 true true"}
	if got := auditRows(t, db.Pool); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("audit rows %q, want %q", got, want)
	}
	if !strings.Contains(logs.String(), "fence row reset by an operator") || !strings.Contains(logs.String(), "actor=alice@ops") {
		t.Fatalf("no WARN log of the reset: %s", logs.String())
	}
	// Raising a fence (to fence out a rogue holder) and creating a row work the same way.
	if r, err := pgfence.FenceReset(ctx, db.Pool, "/tenants/acme/elections/other", pgfence.ResetOpts{Actor: "bob", Reason: "pin", ExpectHighest: 0, To: 500}); err != nil || r.Before != 0 || r.After != 500 {
		t.Fatalf("ResetFence creating a row = %+v, %v (the default Config's table)", r, err)
	}
	if err := guard(ctx, f, db.Pool, tok(t, "/tenants/acme/elections/other@499")); !errors.Is(err, coord.ErrStaleToken) {
		t.Fatalf("token below the raised fence = %v, want stale", err)
	}
}

// TestResetFenceNeverClobbersARace: a reset based on a revision that is no longer
// recorded (a holder wrote after the operator looked — here while the reset
// waited on the row lock of the holder's open transaction) changes nothing and
// is not audited.
func TestResetFenceNeverClobbersARace(t *testing.T) {
	f, db, _ := newFence(t, pgfence.Config{Logger: quietLogger()})
	ctx := testCtx(t)
	const lease = "/tenants/acme/elections/race"
	if err := guard(ctx, f, db.Pool, tok(t, lease+"@7")); err != nil {
		t.Fatal(err)
	}
	// A stale view: the operator saw 5.
	_, err := f.FenceReset(ctx, db.Pool, lease, pgfence.ResetOpts{Actor: "alice", Reason: "r", ExpectHighest: 5})
	var ce *pgfence.ResetConflictError
	if !errors.As(err, &ce) || !errors.Is(err, pgfence.ErrResetConflict) || ce.Expected != 5 || ce.Actual != 7 {
		t.Fatalf("reset with a stale expectation = %v, want *ResetConflictError{5, 7}", err)
	}
	// A holder's transaction writes 8 while the reset (expecting 7) waits for it.
	holder := guardedTx(ctx, t, f, db.Pool, tok(t, lease+"@8"))
	done := runBlocked(ctx, t, db.Pool, holder, func() error { // the reset waits for the holder's transaction
		_, err := f.FenceReset(ctx, db.Pool, lease, pgfence.ResetOpts{Actor: "alice", Reason: "r", ExpectHighest: 7})
		return err
	})
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := coordtest.Recv(t, done, 30*time.Second, "the reset's answer after the holder committed"); !errors.As(err, &ce) || ce.Expected != 7 || ce.Actual != 8 {
		t.Fatalf("reset racing a holder's write = %v, want *ResetConflictError{7, 8}", err)
	}
	if h, _ := f.Highest(ctx, db.Pool, lease); h != 8 {
		t.Fatalf("highest %d after refused resets, want 8", h)
	}
	// A row that appeared is not clobbered by a reset expecting none.
	if _, err := f.FenceReset(ctx, db.Pool, lease, pgfence.ResetOpts{Actor: "alice", Reason: "r", ExpectHighest: 0, To: 3}); !errors.As(err, &ce) || ce.Actual != 8 {
		t.Fatalf("reset expecting no row = %v, want a conflict with 8", err)
	}
	if got := auditRows(t, db.Pool); len(got) != 0 {
		t.Fatalf("refused resets were audited: %q", got)
	}
}

// TestResetFenceRefusesBadInput: every string ResetFence would write is checked
// first; nothing is written for bad input.
func TestResetFenceRefusesBadInput(t *testing.T) {
	f, db, _ := newFence(t, pgfence.Config{Logger: quietLogger()})
	ctx := testCtx(t)
	const lease = "/tenants/acme/elections/input"
	if err := guard(ctx, f, db.Pool, tok(t, lease+"@9")); err != nil {
		t.Fatal(err)
	}
	ok := pgfence.ResetOpts{Actor: "alice", Reason: "why", ExpectHighest: 9}
	cut := "é"[:1] // a string cut mid-rune
	for _, c := range []struct {
		field string
		lease string
		opts  func(o *pgfence.ResetOpts)
	}{
		{"lease", "", nil},
		{"lease", "nul\x00lease", nil},
		{"lease", "bad" + cut, nil},
		{"lease", strings.Repeat("l", 513), nil},
		{"ResetOpts.Actor", lease, func(o *pgfence.ResetOpts) { o.Actor = "" }},
		{"ResetOpts.Actor", lease, func(o *pgfence.ResetOpts) { o.Actor = "al\x00ice" }},
		{"ResetOpts.Actor", lease, func(o *pgfence.ResetOpts) { o.Actor = "al\nice" }},
		{"ResetOpts.Actor", lease, func(o *pgfence.ResetOpts) { o.Actor = strings.Repeat("a", pgfence.MaxResetActorBytes+1) }},
		{"ResetOpts.Reason", lease, func(o *pgfence.ResetOpts) { o.Reason = "" }},
		{"ResetOpts.Reason", lease, func(o *pgfence.ResetOpts) { o.Reason = "why" + cut }},
		{"ResetOpts.Reason", lease, func(o *pgfence.ResetOpts) { o.Reason = "why\x00" }},
		{"ResetOpts.Reason", lease, func(o *pgfence.ResetOpts) { o.Reason = strings.Repeat("r", pgfence.MaxResetReasonBytes+1) }},
		{"ResetOpts.ExpectHighest", lease, func(o *pgfence.ResetOpts) { o.ExpectHighest = -1 }},
		{"ResetOpts.To", lease, func(o *pgfence.ResetOpts) { o.To = -1 }},
		{"ResetOpts.To", lease, func(o *pgfence.ResetOpts) { o.To = 9 }},
	} {
		o := ok
		if c.opts != nil {
			c.opts(&o)
		}
		_, err := f.FenceReset(ctx, db.Pool, c.lease, o)
		var ce *pgfence.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, pgfence.ErrInvalidConfig) || ce.Field != c.field {
			t.Errorf("FenceReset(%q, %+v) = %v, want a *ConfigError for %s", c.lease, o, err, c.field)
		}
	}
	if h, _ := f.Highest(ctx, db.Pool, lease); h != 9 {
		t.Fatalf("highest %d after refused input, want 9", h)
	}
	if got := auditRows(t, db.Pool); len(got) != 0 {
		t.Fatalf("refused input was audited: %q", got)
	}
}

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
