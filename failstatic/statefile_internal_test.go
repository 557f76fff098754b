package failstatic

import (
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestStateFileRoundTripAndCorruption(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	in := snapshotFile{Watched: "/tenants/a/config/", IsPrefix: true, Revision: 42, ConfirmedNs: 7,
		KVs: []kvRecord{{Key: "/tenants/a/config/x", Value: []byte{0, 1, 0xff}, Mod: 40}}}
	b, err := encodeState(kindSnapshot, in)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(path, b); err != nil {
		t.Fatal(err)
	}
	out, err := readSnapshotFile(path, in.Watched, true)
	if err != nil || out.Revision != 42 || string(out.KVs[0].Value) != string([]byte{0, 1, 0xff}) {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	if f, err := readSnapshotFile(filepath.Join(dir, "missing"), in.Watched, true); f != nil || err != nil {
		t.Fatalf("missing file: %v, %v", f, err)
	}
	if _, err := readSnapshotFile(path, "/tenants/b/config/", true); !isReason(err, "identity") {
		t.Fatalf("other prefix: %v", err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".state.tmp-*"))
	if len(leftovers) != 0 {
		t.Fatalf("temp files left: %v", leftovers)
	}

	corrupt := map[string]func([]byte) []byte{
		"magic":     func(b []byte) []byte { b[0] = 'X'; return b },
		"version":   func(b []byte) []byte { b[9] = 9; return b },
		"kind":      func(b []byte) []byte { b[10] = kindConfirm; return b },
		"checksum":  func(b []byte) []byte { b[len(b)-2] ^= 1; return b },
		"truncated": func(b []byte) []byte { return b[:len(b)-5] },
		"empty":     func(b []byte) []byte { return nil },
	}
	for name, f := range corrupt {
		bad := f(append([]byte(nil), b...))
		if err := os.WriteFile(path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := readSnapshotFile(path, in.Watched, true)
		var sfe *StateFileError
		if !errors.Is(err, ErrCorruptState) || !errors.As(err, &sfe) {
			t.Errorf("%s: err = %v, want *StateFileError", name, err)
		}
	}
}

func isReason(err error, reason string) bool {
	var sfe *StateFileError
	return errors.As(err, &sfe) && sfe.Reason == reason
}

// A file that is exactly a whole header saying "no payload" is not truncated:
// the header is complete and consistent, it is the empty payload that is
// refused. One byte less is truncated.
func TestStateFileOfAHeaderAloneIsNotTruncated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	b, err := encodeState(kindSnapshot, snapshotFile{})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(nil)
	header := append(append(b[:11:11], sum[:]...), make([]byte, 8)...) // magic, version, kind; empty checksum; length 0
	for _, tc := range []struct {
		file   []byte
		reason string
	}{{header, "payload"}, {header[:len(header)-1], "truncated"}} {
		if err := os.WriteFile(path, tc.file, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readSnapshotFile(path, "/tenants/a/config/", true); !isReason(err, tc.reason) {
			t.Fatalf("a %d-byte file (header %d) with an empty payload: %v, want Reason %s", len(tc.file), headerLen, err, tc.reason)
		}
	}
}

// The confirmation sidecar moves a snapshot's confirmed time only when it is
// sound and names that very snapshot (the watched key or prefix and the
// revision); otherwise it is ignored and the snapshot's own time stands.
func TestConfirmFileCountsOnlyForItsSnapshot(t *testing.T) {
	dir := t.TempDir()
	const watched = "/tenants/a/config/"
	write := func(name string, kind uint8, v any) string {
		b, err := encodeState(kind, v)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := writeAtomic(path, b); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("good", kindConfirm, confirmFile{Watched: watched, Revision: 42, ConfirmedNs: 77})
	if ns, ok := readConfirmFile(good, watched, 42); !ok || ns != 77 {
		t.Fatalf("sound sidecar: %d, %v, want 77, true", ns, ok)
	}
	for name, path := range map[string]string{
		"missing":          filepath.Join(dir, "missing"),
		"another prefix":   write("other", kindConfirm, confirmFile{Watched: "/tenants/b/config/", Revision: 42, ConfirmedNs: 77}),
		"another revision": write("older", kindConfirm, confirmFile{Watched: watched, Revision: 41, ConfirmedNs: 77}),
		"a snapshot file":  write("snap", kindSnapshot, confirmFile{Watched: watched, Revision: 42, ConfirmedNs: 77}),
	} {
		if ns, ok := readConfirmFile(path, watched, 42); ok || ns != 0 {
			t.Errorf("%s: %d, %v, want it ignored (0, false)", name, ns, ok)
		}
	}
}

// A snapshot at revision 1 — a fresh etcd, nothing under the prefix yet — is
// one etcd could have served: it is sound.
func TestSnapshotOfAFreshEtcdIsSound(t *testing.T) {
	f := snapshotFile{Watched: "/tenants/a/config/", IsPrefix: true, Revision: 1}
	if err := f.check(); err != nil {
		t.Fatalf("snapshot at revision 1 with no keys: %v, want sound", err)
	}
}

// A state file that cannot be put in place (here: its path is a directory, so
// the rename fails) is an error, and the temp file is removed.
func TestWriteAtomicFailureIsReportedAndCleanedUp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	if err := os.MkdirAll(filepath.Join(path, "occupied"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(path, []byte("x")); err == nil {
		t.Fatal("writeAtomic over a non-empty directory = nil, want the rename's error")
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".state.tmp-*")); len(leftovers) != 0 {
		t.Fatalf("temp files left after a failed write: %v", leftovers)
	}
}
