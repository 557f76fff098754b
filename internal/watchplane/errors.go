package watchplane

import "errors"

var (
	// ErrClosed is returned by Subscribe on a closed plane and by Sub.Err and
	// Sub.Sync once the subscription has ended (Close, or the plane closed with
	// its client).
	ErrClosed = errors.New("watchplane: closed")
	// ErrInvalidSpec matches every error Subscribe returns for a malformed Spec.
	ErrInvalidSpec = errors.New("watchplane: invalid spec")

	// ErrOtherCluster: etcd answered from another cluster than the one the
	// plane read first (a restored or rebuilt cluster at the same address,
	// another process's etcd on a freed port). The plane neither confirms its
	// mirror with another cluster's answers nor applies its events: the roots stay
	// unconfirmed, their subscribers see it in Err and go stale, until the
	// process starts again with a client of the new cluster (as Kubernetes'
	// API servers are restarted after an etcd restore).
	ErrOtherCluster = errors.New("watchplane: etcd answered from another cluster")

	errStreamClosed = errors.New("watchplane: watch channel closed")
	errHung         = errors.New("watchplane: watch presumed hung (root unconfirmed for ResetAfter)")
	errOpenTimeout  = errors.New("watchplane: opening the watch timed out (etcd unreachable?)")
)
