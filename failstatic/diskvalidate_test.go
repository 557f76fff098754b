package failstatic_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
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
	etcd := coordtest.Etcd(t)
	cli := etcd.Client(t)
	prefix := testPrefix(t)
	put(t, cli, prefix+"a", "1")
	put(t, cli, prefix+"b", "INVALID")

	// Written by a cache whose Validate accepted everything.
	lax := baseConfig(prefix)
	lax.Validate = nil
	lax.StatePath = filepath.Join(t.TempDir(), "state")
	c := mustNew(t, cli, lax)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	proxy := coordtest.NewProxy(t, strings.TrimPrefix(etcd.Endpoints[0], "http://"))
	proxy.Blackhole()
	down := coordtest.NewEtcdClient(t, proxy.URL())

	// Control: with the lax rules the file is served from disk while etcd is down,
	// so what follows is Validate's doing, not an unreadable file.
	lax.DiskFallbackAfter = 300 * time.Millisecond
	c = mustNew(t, down, lax)
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
	undecodable := strict
	undecodable.StatePath = filepath.Join(t.TempDir(), "state")
	c2 := mustNew(t, cli, undecodable)
	c2.Close()
	errDecode := errors.New("decoder: unknown format")
	undecodable.Decode = func([]failstatic.KV) (conf, error) { return nil, errDecode }
	if _, err := failstatic.New(context.Background(), down, undecodable); !errors.Is(err, failstatic.ErrNoSnapshot) || !errors.Is(err, errDecode) {
		t.Fatalf("New with an undecodable file and etcd down: %v, want ErrNoSnapshot wrapping Decode's error", err)
	}
}
