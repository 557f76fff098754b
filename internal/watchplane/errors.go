package watchplane

import "errors"

var (
	// ErrClosed is returned by Subscribe on a closed plane and by Sub.Err and
	// Sub.Sync once the subscription has ended (Close, or the plane closed with
	// its client).
	ErrClosed = errors.New("watchplane: closed")
	// ErrInvalidSpec matches every error Subscribe returns for a malformed Spec.
	ErrInvalidSpec = errors.New("watchplane: invalid spec")

	errStreamClosed = errors.New("watchplane: watch channel closed")
	errHung         = errors.New("watchplane: watch presumed hung (root unconfirmed for ResetAfter)")
	errOpenTimeout  = errors.New("watchplane: opening the watch timed out (etcd unreachable?)")
)
