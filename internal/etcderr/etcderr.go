// Package etcderr maps etcd's errors onto coord's error classes, so that a caller of
// any coordkit package can match etcd's "no leader" with coord.ErrNoLeader and a
// compacted revision with coord.ErrCompacted, without importing etcd's rpctypes.
package etcderr

import (
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/status"

	"github.com/coordkit/coordkit/coord"
)

// Classify returns err so that it also matches the coord class it belongs to:
// coord.ErrNoLeader when etcd answered that it has no leader (a partitioned member,
// an election in progress: retry later), coord.ErrCompacted when the requested
// revision was compacted away (re-list). Any other error, and nil, is returned
// unchanged; so is an error already classified. The original error stays in the
// chain (errors.Is(err, rpctypes.ErrNoLeader) still holds).
func Classify(err error) error {
	switch {
	case err == nil, errors.Is(err, coord.ErrNoLeader), errors.Is(err, coord.ErrCompacted):
		return err
	case is(err, rpctypes.ErrNoLeader, rpctypes.ErrGRPCNoLeader):
		return fmt.Errorf("%w: %w", coord.ErrNoLeader, err)
	case is(err, rpctypes.ErrCompacted, rpctypes.ErrGRPCCompacted):
		return fmt.Errorf("%w: %w", coord.ErrCompacted, err)
	}
	return err
}

// is reports whether err is etcd's typed error or carries its gRPC status.
func is(err, etcd, grpc error) bool {
	if errors.Is(err, etcd) || errors.Is(err, grpc) {
		return true
	}
	st, ok := status.FromError(err)
	want, _ := status.FromError(grpc)
	return ok && st.Code() == want.Code() && st.Message() == want.Message()
}
