package failstatic

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// A state file that is well framed but cannot describe an etcd snapshot of what
// the cache watches — revision 0 or negative, a key outside the watched prefix, a
// key mod revision after the snapshot's — is refused even with no Validate set:
// New with etcd down fails with ErrNoSnapshot instead of serving it. A
// confirmation time of 0 or less is unknown: the snapshot is served, stale.
func TestStateFileContentIsChecked(t *testing.T) {
	etcd := coordtest.Etcd(t)
	proxy := coordtest.NewProxy(t, strings.TrimPrefix(etcd.Endpoints[0], "http://"))
	proxy.Blackhole()
	down := coordtest.NewEtcdClient(t, proxy.URL())
	const prefix = "/tenants/acme/config/"
	now := time.Now().UnixNano()
	kv := func(k string, mod int64) kvRecord { return kvRecord{Key: k, Value: []byte("v"), Mod: mod} }
	cfg := func(path string, isPrefix bool) Config[map[string]string] {
		c := Config[map[string]string]{
			Decode: func(kvs []KV) (map[string]string, error) {
				m := map[string]string{}
				for _, kv := range kvs {
					m[kv.Key] = string(kv.Value)
				}
				return m, nil
			},
			StatePath:         path,
			InitialTimeout:    200 * time.Millisecond,
			DiskFallbackAfter: 50 * time.Millisecond,
			Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		}
		if isPrefix {
			c.Prefix = prefix
		} else {
			c.Key = prefix + "one"
		}
		return c
	}
	write := func(t *testing.T, f snapshotFile) string {
		path := filepath.Join(t.TempDir(), "state")
		b, err := encodeState(kindSnapshot, f)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeAtomic(path, b); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		name string
		f    snapshotFile
	}{
		{"revision 0", snapshotFile{Watched: prefix, IsPrefix: true, Revision: 0, ConfirmedNs: now}},
		{"negative revision", snapshotFile{Watched: prefix, IsPrefix: true, Revision: -5, ConfirmedNs: now, KVs: []kvRecord{kv(prefix+"a", 1)}}},
		{"key of another tenant", snapshotFile{Watched: prefix, IsPrefix: true, Revision: 9, ConfirmedNs: now, KVs: []kvRecord{kv(prefix+"a", 3), kv("/tenants/other/config/a", 4)}}},
		{"key outside the single key", snapshotFile{Watched: prefix + "one", Revision: 9, ConfirmedNs: now, KVs: []kvRecord{kv(prefix+"two", 3)}}},
		{"mod revision after the snapshot", snapshotFile{Watched: prefix, IsPrefix: true, Revision: 9, ConfirmedNs: now, KVs: []kvRecord{kv(prefix+"a", 10)}}},
		{"mod revision 0", snapshotFile{Watched: prefix, IsPrefix: true, Revision: 9, ConfirmedNs: now, KVs: []kvRecord{kv(prefix+"a", 0)}}},
		{"a key twice", snapshotFile{Watched: prefix, IsPrefix: true, Revision: 9, ConfirmedNs: now, KVs: []kvRecord{kv(prefix+"a", 3), kv(prefix+"a", 4)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(context.Background(), down, cfg(write(t, tc.f), tc.f.IsPrefix))
			var sfe *StateFileError
			if !errors.Is(err, ErrNoSnapshot) || !errors.As(err, &sfe) || sfe.Reason != "invalid" {
				t.Fatalf("New: %v, want ErrNoSnapshot with a *StateFileError (invalid)", err)
			}
		})
	}
	// Control: a sound file is served from disk through the same blackhole.
	good := snapshotFile{Watched: prefix, IsPrefix: true, Revision: 9, ConfirmedNs: now, KVs: []kvRecord{kv(prefix+"a", 3)}}
	c, err := New(context.Background(), down, cfg(write(t, good), true))
	if err != nil {
		t.Fatalf("sound file: %v", err)
	}
	if s := c.Get(); s.Source != SourceDisk || s.Value[prefix+"a"] != "v" || s.Staleness >= UnknownStaleness {
		t.Fatalf("sound file: %+v, want it served from disk, not of unknown staleness", s)
	}
	c.Close()
	// An implausible confirmation time: served, but of unknown staleness.
	unconfirmed := good
	unconfirmed.ConfirmedNs = 0
	c, err = New(context.Background(), down, cfg(write(t, unconfirmed), true))
	if err != nil {
		t.Fatalf("file confirmed at time 0: %v", err)
	}
	if s := c.Get(); s.Source != SourceDisk || s.Staleness < UnknownStaleness {
		t.Fatalf("file confirmed at time 0: %+v, want it served with unknown staleness", s)
	}
	c.Close()
	if st := proxy.Stats(); st.Blackholes != 1 || st.DroppedBytes == 0 {
		t.Fatalf("the blackhole dropped nothing: %+v", st)
	}
}
