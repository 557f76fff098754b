package failstatic

import (
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
