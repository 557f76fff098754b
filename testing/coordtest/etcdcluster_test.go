package coordtest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// EtcdMember.Start, like RestartMember, returns once the member is ready (its
// process printed "ready"), and a member started on a port the test chose serves
// on it.
func TestEtcdMemberStartWaitsUntilReady(t *testing.T) {
	port := FreePort(t)
	c := EtcdCluster(t, 1, &EtcdClusterOpts{ClientPorts: []int{port}})
	m := c.Members[0]
	if want := fmt.Sprintf("http://127.0.0.1:%d", port); m.ClientURL != want {
		t.Fatalf("ClientURL %q, want the chosen port: %q", m.ClientURL, want)
	}
	m.Kill()
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	// Straight after Start returns: the output of this run already says ready.
	m.mu.Lock()
	mark := m.mark
	m.mu.Unlock()
	if out := m.out.Bytes()[mark:]; !bytes.Contains(out, []byte("ready")) {
		t.Fatalf("Start returned before the member was ready; its output so far: %q", out)
	}
	cli := NewEtcdClient(t, m.ClientURL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put on the member on its chosen port: %v", err)
	}
	if st := m.Stats(); st.Starts != 2 || st.Kills != 1 {
		t.Fatalf("stats %+v, want 2 starts and 1 kill", st)
	}
	// Ports beyond the members, or negative, are refused.
	for _, opts := range []*EtcdClusterOpts{{ClientPorts: []int{0, 0}}, {PeerPorts: []int{-1}}} {
		if _, _, err := opts.ports(1); err == nil {
			t.Errorf("ports %+v for 1 member accepted", opts)
		}
	}
}

// The first Build in a test binary says so on stderr: it can take a minute, and a
// silent test looks hung.
func TestBuildSaysItIsBuilding(t *testing.T) {
	var out bytes.Buffer
	old := buildLog
	buildLog = &out
	defer func() { buildLog = old }()
	Build(t, "./testdata/hello")
	msg := out.String()
	if !strings.Contains(msg, "coordtest: building ./testdata/hello") || !strings.Contains(msg, "built") {
		t.Fatalf("stderr %q: want a line before the build and one after it", msg)
	}
	out.Reset()
	Build(t, "./testdata/hello") // memoised: nothing to say
	if out.Len() != 0 {
		t.Fatalf("a memoised Build wrote %q", out.String())
	}
}

// Build's lock is exclusive across open files, as it is across processes: a
// second holder waits until the first releases it.
func TestBuildLockIsExclusive(t *testing.T) {
	path := t.TempDir() + "/x.lock"
	unlock, err := lockFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan func(), 1)
	go func() {
		u, err := lockFile(path)
		if err != nil {
			t.Error(err)
			u = func() {}
		}
		got <- u
	}()
	select {
	case u := <-got:
		u()
		t.Fatal("a second lockFile got the lock while the first held it")
	case <-time.After(200 * time.Millisecond):
	}
	unlock()
	select {
	case u := <-got:
		u()
	case <-time.After(10 * time.Second):
		t.Fatal("the second lockFile did not get the lock within 10 s of its release")
	}
}
