package failstatic_test

import (
	"context"
	"errors"
	"io/fs"
	"testing"
	"time"

	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestDiskSnapshotIsValidated: the last-known-good file holds a snapshot that the
// cache's Validate now rejects (written under laxer rules, or edited by hand). A
// cache started while etcd is unreachable must not serve it: New fails with
// ErrNoSnapshot, the error says the file was rejected and carries Validate's
// error. With etcd reachable the live snapshot is served and the rejected file is
// reported in Status. The same holds for a file that no longer decodes.
func TestDiskSnapshotIsValidated(t *testing.T) {
	etcd, cli, prefix := etcdPrefix(t)
	put(t, cli, prefix+"a", "1")
	put(t, cli, prefix+"b", "INVALID")

	// Written by a cache whose Validate accepted everything.
	lax := baseConfig(prefix)
	lax.Validate = nil
	lax, _ = withState(t, cli, lax)

	down, proxy := blackholed(t, etcd)

	// Control: with the lax rules the file is served from disk while etcd is down,
	// so what follows is Validate's doing, not an unreadable file.
	lax.DiskFallbackAfter = 300 * time.Millisecond
	c := mustNew(t, down, lax)
	if s := c.Get(); s.Source != failstatic.SourceDisk || s.Value[prefix+"b"] != "INVALID" {
		t.Fatalf("control: %+v, want the file's snapshot from disk", s)
	}
	c.Close()

	strict := lax
	strict.Validate = validateConf
	strict.InitialTimeout = 300 * time.Millisecond
	_, err := failstatic.New(context.Background(), down, strict)
	var sfe *failstatic.StateFileError
	switch {
	case err == nil:
		t.Fatal("New served a disk snapshot that Validate rejects")
	case !errors.Is(err, failstatic.ErrNoSnapshot):
		t.Fatalf("New: %v, want ErrNoSnapshot", err)
	case !errors.As(err, &sfe) || sfe.Reason != "rejected" || !errors.Is(err, errInvalid):
		t.Fatalf("New: %v, want a *StateFileError (rejected) wrapping Validate's error", err)
	}
	if proxy.Stats().DroppedBytes == 0 {
		t.Fatal("the client never tried etcd through the blackhole")
	}

	// etcd reachable: live (after the invalid key is fixed), and the file's
	// rejection is reported.
	put(t, cli, prefix+"b", "2")
	c = mustNew(t, cli, strict)
	defer c.Close()
	if s := c.Get(); s.Source != failstatic.SourceLive || s.Value[prefix+"b"] != "2" {
		t.Fatalf("with etcd up: %+v, want live", s)
	}
	if err := c.Status().StateFileError; !errors.As(err, &sfe) || sfe.Reason != "rejected" || !errors.Is(err, errInvalid) {
		t.Fatalf("Status().StateFileError = %v, want the rejected file", err)
	}

	// A file that no longer decodes is rejected the same way.
	undecodable, _ := withState(t, cli, strict)
	errDecode := errors.New("decoder: unknown format")
	undecodable.Decode = func([]failstatic.KV) (conf, error) { return nil, errDecode }
	if _, err := failstatic.New(context.Background(), down, undecodable); !errors.Is(err, failstatic.ErrNoSnapshot) || !errors.Is(err, errDecode) {
		t.Fatalf("New with an undecodable file and etcd down: %v, want ErrNoSnapshot wrapping Decode's error", err)
	}
}

func TestStartsFromDiskWhenEtcdDown(t *testing.T) {
	etcd, cli, prefix := etcdPrefix(t)
	put(t, cli, prefix+"a", "1")
	put(t, cli, prefix+"b", "2")
	cfg, live := withState(t, cli, baseConfig(prefix))

	down, proxy := blackholed(t, etcd)
	start := time.Now()
	c2 := mustNew(t, down, cfg)
	took := time.Since(start)
	s := c2.Get()
	if s.Source != failstatic.SourceDisk || s.Revision != live.Revision || !equalConf(s.Value, live.Value) {
		t.Fatalf("from disk: %+v, want %+v from disk", s, live)
	}
	t.Logf("cold start from disk with etcd blackholed took %v", took)

	// The client really tried etcd through the hole (count the fault).
	coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "bytes dropped by the blackhole", func() bool { return proxy.Stats().DroppedBytes > 0 })
	if c2.Get().Source != failstatic.SourceDisk {
		t.Fatal("went live through a blackhole")
	}
	// When etcd comes back, the cache goes live.
	proxy.Heal()
	proxy.Cut()
	put(t, cli, prefix+"c", "3")
	coordtest.Until(t, 60*time.Second, 5*time.Millisecond, "cache to go live", func() bool {
		s := c2.Get()
		return s.Source == failstatic.SourceLive && s.Value[prefix+"c"] == "3"
	})
	if st := proxy.Stats(); st.Blackholes != 1 || st.DroppedBytes == 0 {
		t.Fatalf("fault not injected: %+v", st)
	}
}

func TestCorruptStateFileIgnored(t *testing.T) {
	etcd, cli, prefix := etcdPrefix(t)
	put(t, cli, prefix+"a", "1")
	cfg, _ := withState(t, cli, baseConfig(prefix))
	flipByte(t, cfg.StatePath, -1)

	// etcd up: the corrupt file is reported and the live snapshot served.
	c2 := mustNew(t, cli, cfg)
	var sfe *failstatic.StateFileError
	if err := c2.Status().StateFileError; !errors.As(err, &sfe) || sfe.Reason != "checksum" {
		t.Fatalf("StateFileError = %v, want checksum", err)
	}
	if c2.Get().Source != failstatic.SourceLive {
		t.Fatal("not live")
	}
	c2.Close() // rewrites a good file
	flipByte(t, cfg.StatePath, -1)

	// etcd down: no snapshot, and the error says why.
	down, _ := blackholed(t, etcd)
	cfg.InitialTimeout = 300 * time.Millisecond
	_, err := failstatic.New(context.Background(), down, cfg)
	if !errors.Is(err, failstatic.ErrNoSnapshot) || !errors.Is(err, failstatic.ErrCorruptState) {
		t.Fatalf("New with corrupt file and etcd down: %v", err)
	}
}

func TestReadStateFile(t *testing.T) {
	_, cli, prefix := etcdPrefix(t)
	put(t, cli, prefix+"a", "1")
	last := put(t, cli, prefix+"b", "2")
	start := time.Now()
	cfg, s := withState(t, cli, baseConfig(prefix))
	rev := s.Revision
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
