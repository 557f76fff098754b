package etcderr_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/etcderr"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// A read of a compacted revision, from a real etcd, is classified ErrCompacted and
// keeps etcd's own error in the chain.
func TestClassifyCompactedFromEtcd(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := cli.Put(ctx, "k", "1")
	if err != nil {
		t.Fatal(err)
	}
	last, err := cli.Put(ctx, "k", "2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, last.Header.Revision); err != nil {
		t.Fatal(err)
	}
	_, err = cli.Get(ctx, "k", clientv3.WithRev(first.Header.Revision))
	got := etcderr.Classify(fmt.Errorf("read: %w", err))
	if !errors.Is(got, coord.ErrCompacted) || !errors.Is(got, rpctypes.ErrCompacted) || !coord.Retryable(got) {
		t.Fatalf("Classify(%v) = %v: want coord.ErrCompacted (retryable) wrapping etcd's error", err, got)
	}
	if errors.Is(got, coord.ErrNoLeader) {
		t.Fatalf("a compaction classified as no leader: %v", got)
	}
}

func TestClassifyLeavesOtherErrorsAlone(t *testing.T) {
	other := errors.New("boom")
	for _, err := range []error{nil, other, context.Canceled, rpctypes.ErrLeaseNotFound} {
		if got := etcderr.Classify(err); got != err {
			t.Fatalf("Classify(%v) = %v, want it unchanged", err, got)
		}
	}
	once := etcderr.Classify(rpctypes.ErrGRPCNoLeader)
	if !errors.Is(once, coord.ErrNoLeader) || etcderr.Classify(once) != once {
		t.Fatalf("Classify is not idempotent: %v", once)
	}
}
