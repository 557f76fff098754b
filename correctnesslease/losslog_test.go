package correctnesslease

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// A held lease that loses its authority says so in the log (a warning with the
// lease, its token and the reason), for the operator who must know a holder
// stopped; a Release is no news and logs nothing, nor does a request that never
// held the lease. The loss's cause says how it was seen (a deletion, at its
// revision).
func TestLossOfAHeldLeaseIsLoggedAReleaseIsNot(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var logs coordtest.Buffer // both sessions' logs
	cfg := Config{Tenant: coordtest.Tenant(t), TTL: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	s := newSession(t, cli, cfg)
	const lostMsg = "correctnesslease: lease lost authority"

	released := mustAcquire(ctx, t, s, "released")
	if err := released.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A request that never held: TryAcquire behind the holder below.
	held := mustAcquire(ctx, t, s, "deleted")
	rival := newSession(t, cli, cfg)
	if _, err := TryAcquire(ctx, rival, "deleted"); err == nil {
		t.Fatal("TryAcquire of a held lease succeeded")
	}
	if strings.Contains(logs.String(), lostMsg) {
		t.Fatalf("a Release or a request that never held logged a loss:\n%s", logs.String())
	}

	del, err := cli.Delete(ctx, held.Key())
	if err != nil {
		t.Fatal(err)
	}
	// The warning follows the cancellation of the lease's context: wait for it.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), lostMsg) {
		if time.Now().After(deadline) {
			t.Fatalf("the loss of a held lease (%s, key deleted) is not logged:\n%s", held.Token(), logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The cause names the revision of the deletion, to look up in etcd's history.
	if r := lossReason(held.Err()); r != coord.LossKeyDeleted || !strings.Contains(held.Err().Error(), fmt.Sprintf("deleted at revision %d", del.Header.Revision)) {
		t.Fatalf("lease lost with %v, want %s naming the deletion at revision %d", held.Err(), coord.LossKeyDeleted, del.Header.Revision)
	}
	out := logs.String()
	if !strings.Contains(out, held.Token().Lease()) || !strings.Contains(out, held.Token().String()) || !strings.Contains(out, string(coord.LossKeyDeleted)) {
		t.Fatalf("the loss of a held lease (%s) is logged without its lease, token or reason:\n%s", held.Token(), out)
	}
}
