package failstatic

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/coordkit/coordkit/internal/pgtext"
)

// State file layout (all integers big-endian):
//
//	magic   8 bytes  "CKFSTATE"
//	version uint16   stateVersion
//	kind    uint8    kindSnapshot or kindConfirm
//	sum     32 bytes SHA-256 of payload
//	length  uint64   len(payload)
//	payload JSON     snapshotFile or confirmFile
const (
	stateMagic   = "CKFSTATE"
	stateVersion = 1
	kindSnapshot = 1
	kindConfirm  = 2
	headerLen    = 8 + 2 + 1 + 32 + 8
)

// snapshotFile is the persisted last-known-good snapshot.
type snapshotFile struct {
	Watched     string     `json:"watched"`
	IsPrefix    bool       `json:"prefix"`
	Revision    int64      `json:"revision"`
	ConfirmedNs int64      `json:"confirmed_unix_nano"` // wall clock when written (it was current then)
	KVs         []kvRecord `json:"kvs"`
}

type kvRecord struct {
	Key   string `json:"k"`
	Value []byte `json:"v"`
	Mod   int64  `json:"m"`
}

// confirmFile records when the snapshot at Revision was last confirmed current.
type confirmFile struct {
	Watched     string `json:"watched"`
	Revision    int64  `json:"revision"`
	ConfirmedNs int64  `json:"confirmed_unix_nano"`
}

func encodeState(kind uint8, v any) ([]byte, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(payload)
	b := make([]byte, 0, headerLen+len(payload))
	b = append(b, stateMagic...)
	b = binary.BigEndian.AppendUint16(b, stateVersion)
	b = append(b, kind)
	b = append(b, sum[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(payload)))
	return append(b, payload...), nil
}

// decodeState checks the framing of b and unmarshals its payload into v.
func decodeState(path string, b []byte, kind uint8, v any) error {
	bad := func(reason string, err error) error {
		return &StateFileError{Path: path, Reason: reason, Err: err}
	}
	if len(b) < headerLen {
		return bad("truncated", fmt.Errorf("%d bytes, header needs %d", len(b), headerLen))
	}
	if !bytes.Equal(b[:8], []byte(stateMagic)) {
		return bad("magic", nil)
	}
	if ver := binary.BigEndian.Uint16(b[8:10]); ver != stateVersion {
		return bad("version", fmt.Errorf("version %d, want %d", ver, stateVersion))
	}
	if b[10] != kind {
		return bad("kind", fmt.Errorf("kind %d, want %d", b[10], kind))
	}
	n := binary.BigEndian.Uint64(b[43:51])
	payload := b[headerLen:]
	if uint64(len(payload)) != n {
		return bad("truncated", fmt.Errorf("payload %d bytes, header says %d", len(payload), n))
	}
	if sum := sha256.Sum256(payload); !bytes.Equal(sum[:], b[11:43]) {
		return bad("checksum", nil)
	}
	if err := json.Unmarshal(payload, v); err != nil {
		return bad("payload", err)
	}
	return nil
}

// readSnapshotFile loads the state file. A missing file returns (nil, nil).
func readSnapshotFile(path, watched string, isPrefix bool) (*snapshotFile, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &StateFileError{Path: path, Reason: "read", Err: err}
	}
	var f snapshotFile
	if err := decodeState(path, b, kindSnapshot, &f); err != nil {
		return nil, err
	}
	if f.Watched != watched || f.IsPrefix != isPrefix {
		return nil, &StateFileError{Path: path, Reason: "identity",
			Err: fmt.Errorf("file is for %q (prefix=%v), cache watches %q (prefix=%v)", f.Watched, f.IsPrefix, watched, isPrefix)}
	}
	if err := f.check(); err != nil {
		return nil, &StateFileError{Path: path, Reason: "invalid", Err: err}
	}
	return &f, nil
}

// check refuses a snapshot that no etcd could have served for what the file
// watches, whatever Validate says: a revision below 1, a key outside the watched
// key or prefix, a key twice, a mod revision outside [1, Revision].
func (f *snapshotFile) check() error {
	if f.Revision < 1 {
		return fmt.Errorf("revision %d: etcd revisions start at 1", f.Revision)
	}
	seen := make(map[string]bool, len(f.KVs))
	for _, kv := range f.KVs {
		key := pgtext.Clean(kv.Key, 128)
		switch {
		case f.IsPrefix && !strings.HasPrefix(kv.Key, f.Watched), !f.IsPrefix && kv.Key != f.Watched:
			return fmt.Errorf("key %q is outside the watched %q", key, pgtext.Clean(f.Watched, 128))
		case seen[kv.Key]:
			return fmt.Errorf("key %q appears twice", key)
		case kv.Mod < 1 || kv.Mod > f.Revision:
			return fmt.Errorf("key %q: mod revision %d outside [1, %d]", key, kv.Mod, f.Revision)
		}
		seen[kv.Key] = true
	}
	return nil
}

// readConfirmFile loads the confirmation sidecar; any problem returns ok=false
// (the snapshot file's own time is then used, which only overstates staleness).
func readConfirmFile(path, watched string, rev int64) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	var f confirmFile
	if decodeState(path, b, kindConfirm, &f) != nil || f.Watched != watched || f.Revision != rev {
		return 0, false
	}
	return f.ConfirmedNs, true
}

// writeAtomic replaces path with data: write a temp file in the same directory,
// fsync it, rename it over path, fsync the directory. Readers see the old file or
// the new one, never a mix; after a crash the file is one of the two.
func writeAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
