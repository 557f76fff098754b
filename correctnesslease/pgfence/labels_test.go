package pgfence_test

import (
	"fmt"
	"testing"

	"github.com/coordkit/coordkit/correctnesslease/pgfence"
)

// TestRejectionLabelCardinalityIsBounded: each distinct lease name is a fence row
// and would be a coordkit.lease label value of coordkit.pgfence.rejected. Past
// DefaultMaxLeaseLabels distinct leases the counter reports "other", and counts
// every rejection.
func TestRejectionLabelCardinalityIsBounded(t *testing.T) {
	f, db, reader := newFence(t, pgfence.Config{Logger: quietLogger()})
	ctx := testCtx(t)
	const leases = 110
	for i := range leases {
		lease := fmt.Sprintf("/tenants/t/elections/n-%03d", i)
		if err := guard(ctx, f, db.Pool, tok(t, lease+"@2")); err != nil {
			t.Fatal(err)
		}
		if err := guard(ctx, f, db.Pool, tok(t, lease+"@1")); err == nil {
			t.Fatalf("%s@1 accepted after @2", lease)
		}
	}
	got := rejections(t, reader)
	var total int64
	for _, n := range got {
		total += n
	}
	if len(got) > 101 || total != leases || got["other"] != leases-100 {
		t.Fatalf("coordkit.pgfence.rejected: %d label values, total %d, other %d; want at most 101, %d, %d", len(got), total, got["other"], leases, leases-100)
	}
}
