package pgfence_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestRunStepsDownOnStaleToken: the work function of a Run term returns the
// resource's stale-token verdict (a newer holder wrote while this one still
// looked first in etcd). That is a loss of authority: Run must step down, report
// it through OnLost with its own reason, and campaign again — not return the
// error and end the leader loop. The next term's token is newer than the one
// that fenced the first out, so its write is accepted.
func TestRunStepsDownOnStaleToken(t *testing.T) {
	f, db, reader := newFence(t, pgfence.Config{})
	ctx := testCtx(t)
	cli := coordtest.Etcd(t).Client(t)
	if _, err := db.Pool.Exec(ctx, "CREATE TABLE ledger (entry text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	s, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: "stale-run", TTL: 3 * time.Second, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.WithoutCancel(ctx))

	var mu sync.Mutex
	var terms []coord.Token
	var losses []coord.LossReason
	var lossErrs []error
	var newer coord.Token
	opts := &correctnesslease.RunOpts{
		Backoff: coord.Backoff{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond},
		OnLost: func(_ coord.Token, reason coord.LossReason, err error) {
			mu.Lock()
			defer mu.Unlock()
			losses, lossErrs = append(losses, reason), append(lossErrs, err)
		},
	}
	runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = correctnesslease.Run(runCtx, s, "billing", func(ctx context.Context, tok coord.Token) error {
		mu.Lock()
		terms = append(terms, tok)
		first := len(terms) == 1
		mu.Unlock()
		if first {
			// A newer holder (a larger revision of the same lease) writes first.
			n, err := coord.ParseToken(fmt.Sprintf("%s@%d", tok.Lease(), tok.Revision()+1))
			if err != nil {
				return err
			}
			newer = n
			if err := f.Exec(ctx, db.Pool, newer, insertInto("ledger", "newer holder")); err != nil {
				return fmt.Errorf("newer holder's write: %w", err)
			}
		}
		return f.Exec(ctx, db.Pool, tok, insertInto("ledger", tok.String()))
	}, opts)
	if err != nil {
		t.Fatalf("Run = %v, want nil (the second term's write succeeds)", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(terms) != 2 {
		t.Fatalf("%d terms %v, want 2: a stale token ends the term, Run campaigns again", len(terms), terms)
	}
	if len(losses) != 2 || losses[0] != coord.LossStaleToken || losses[1] != coord.LossReleased {
		t.Fatalf("OnLost reasons %v, want [%s %s]", losses, coord.LossStaleToken, coord.LossReleased)
	}
	var stale *coord.StaleTokenError
	if !errors.As(lossErrs[0], &stale) || stale.Presented != terms[0] || stale.Highest != newer {
		t.Fatalf("OnLost error %v, want the *coord.StaleTokenError of %s against %s", lossErrs[0], terms[0], newer)
	}
	if c, _ := terms[1].Compare(newer); c != 1 {
		t.Fatalf("second term's token %s not newer than %s", terms[1], newer)
	}
	rows, _ := db.Pool.Query(ctx, "SELECT entry FROM ledger ORDER BY entry")
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"newer holder", terms[1].String()}; fmt.Sprint(got) != fmt.Sprint(want) && fmt.Sprint(got) != fmt.Sprint([]string{want[1], want[0]}) {
		t.Fatalf("ledger %q, want %q (the stale term wrote nothing)", got, want)
	}
	if n := rejections(t, reader)[terms[0].Lease()]; n != 1 {
		t.Fatalf("coordkit.pgfence.rejected = %d, want 1", n)
	}
}
