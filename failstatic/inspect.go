package failstatic

import (
	"os"
	"time"
)

// StateFileInfo is what a Cache's state file says, as an operator reads it
// (coordctl config staleness): what it watches, which revision it holds and when
// that was last confirmed current.
type StateFileInfo struct {
	Path     string
	Watched  string // the key or prefix
	IsPrefix bool
	Revision int64 // the etcd revision of the snapshot
	Keys     int   // keys in the snapshot
	// MaxModRevision is the newest mod revision among the snapshot's keys (0 when
	// it holds none): etcd holding a newer one means the file is behind.
	MaxModRevision int64
	// Confirmed is when the snapshot was last confirmed current: the confirmation
	// sidecar (Path+".confirmed") when it matches, else the snapshot's own time.
	Confirmed time.Time
}

// ReadStateFile reads a Cache's state file at path without decoding its values
// and without a Cache: for tools on the host of a service. It checks the file as
// a Cache does on start (framing, checksum, revisions, keys inside what it
// watches) and returns a *StateFileError (ErrCorruptState) for an unusable one,
// including a missing one (Reason "read", unwrapping to fs.ErrNotExist). It
// reads two files and does not block otherwise.
func ReadStateFile(path string) (StateFileInfo, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return StateFileInfo{}, &StateFileError{Path: path, Reason: "read", Err: err}
	}
	var f snapshotFile
	if err := decodeState(path, b, kindSnapshot, &f); err != nil {
		return StateFileInfo{}, err
	}
	if err := f.check(); err != nil {
		return StateFileInfo{}, &StateFileError{Path: path, Reason: "invalid", Err: err}
	}
	info := StateFileInfo{Path: path, Watched: f.Watched, IsPrefix: f.IsPrefix, Revision: f.Revision, Keys: len(f.KVs)}
	for _, kv := range f.KVs {
		info.MaxModRevision = max(info.MaxModRevision, kv.Mod)
	}
	confirmed := f.ConfirmedNs
	if ns, ok := readConfirmFile(path+".confirmed", f.Watched, f.Revision); ok && ns > confirmed {
		confirmed = ns
	}
	if confirmed > 0 {
		info.Confirmed = time.Unix(0, confirmed)
	}
	return info, nil
}
