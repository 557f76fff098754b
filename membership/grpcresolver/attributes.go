package grpcresolver

import (
	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/resolver"

	"github.com/coordkit/coordkit/membership"
)

type memberKey struct{}

type revisionKey struct{}

// memberAttr carries a Member in gRPC attributes. Two are equal when they
// describe the same write of the same key.
type memberAttr struct{ m membership.Member }

// Equal reports whether o is the same member record.
func (a memberAttr) Equal(o any) bool {
	b, ok := o.(memberAttr)
	return ok && a.m.Instance == b.m.Instance && a.m.Lease == b.m.Lease && a.m.ModRevision == b.m.ModRevision
}

// Member returns the membership record of an endpoint the resolver produced,
// for balancers and pickers that weigh by metadata (zone, weight, version).
func Member(ep resolver.Endpoint) (membership.Member, bool) { return MemberOf(ep.Attributes) }

// MemberOf returns the membership record stored in an endpoint's attributes.
func MemberOf(attrs *attributes.Attributes) (membership.Member, bool) {
	a, ok := attrs.Value(memberKey{}).(memberAttr)
	return a.m, ok
}

// Revision returns the etcd revision of the view a resolver state came from.
func Revision(s resolver.State) (int64, bool) {
	rev, ok := s.Attributes.Value(revisionKey{}).(int64)
	return rev, ok
}
