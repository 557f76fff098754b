package failstatic_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestReadStateFile(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	prefix := testPrefix(t)
	put(t, cli, prefix+"a", "1")
	last := put(t, cli, prefix+"b", "2")
	cfg := baseConfig(prefix)
	cfg.StatePath = filepath.Join(t.TempDir(), "state")
	start := time.Now()
	c := mustNew(t, cli, cfg)
	rev := c.Get().Revision
	if err := c.Close(); err != nil { // writes what is pending
		t.Fatal(err)
	}
	info, err := failstatic.ReadStateFile(cfg.StatePath)
	if err != nil {
		t.Fatal(err)
	}
	if info.Watched != prefix || !info.IsPrefix || info.Revision != rev || info.Keys != 2 || info.MaxModRevision != last {
		t.Fatalf("ReadStateFile = %+v, want prefix %s revision %d, 2 keys, max mod %d", info, prefix, rev, last)
	}
	if info.Confirmed.Before(start.Add(-time.Second)) || info.Confirmed.After(time.Now()) {
		t.Fatalf("Confirmed %v, want between %v and now", info.Confirmed, start)
	}

	_, err = failstatic.ReadStateFile(cfg.StatePath + ".missing")
	var sfe *failstatic.StateFileError
	if !errors.As(err, &sfe) || sfe.Reason != "read" || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	flipByte(t, cfg.StatePath, -1)
	if _, err := failstatic.ReadStateFile(cfg.StatePath); !errors.As(err, &sfe) || sfe.Reason != "checksum" || !errors.Is(err, failstatic.ErrCorruptState) {
		t.Fatalf("corrupt file: %v", err)
	}
}
