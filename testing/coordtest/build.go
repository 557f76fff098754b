package coordtest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildLog is where Build announces a build: stderr, so that a test waiting for
// it does not look hung (tests of Build swap it).
var buildLog io.Writer = os.Stderr

// builds memoises Build within one test binary: building the etcd server takes
// seconds even from the build cache, and every cluster test needs it.
var builds sync.Map // import path -> *buildResult

type buildResult struct {
	once sync.Once
	path string
	out  []byte
	err  error
}

// Build compiles the main package at importPath with the go command and returns the
// binary's path. The result is memoised for the life of the test binary and lives
// in a directory under os.TempDir() shared by concurrent test processes (written to
// a temporary name, then renamed). The first call for importPath says on stderr
// that it is building, and when it is done. The binary is built without -race even
// when GOFLAGS asks for it (scripts/test.sh): the servers a test starts are not the
// code under test, and race-instrumented they run several times slower (etcd's
// bcrypt check of an auth token then outlasts a keepalive timeout).
func Build(t testing.TB, importPath string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(importPath, &buildResult{})
	r := v.(*buildResult)
	r.once.Do(func() {
		sum := sha256.Sum256([]byte(importPath))
		dir := filepath.Join(os.TempDir(), "coordtest-bin")
		if r.err = os.MkdirAll(dir, 0o755); r.err != nil {
			return
		}
		r.path = filepath.Join(dir, filepath.Base(importPath)+"-"+hex.EncodeToString(sum[:6]))
		tmp, err := os.CreateTemp(dir, "build-*")
		if err != nil {
			r.err = err
			return
		}
		tmp.Close()
		hint := ""
		if importPath == etcdBinPkg {
			hint = "; COORD_TEST_ETCD_BIN=/path/to/etcd skips it"
		}
		fmt.Fprintf(buildLog, "coordtest: building %s with go build, once per test binary (seconds from the build cache, a minute or more cold%s)\n", importPath, hint)
		start := time.Now()
		// One go build of importPath at a time across the test processes that
		// go test runs at once: the go command does not share a compile in
		// flight, so on a cold cache each would compile the whole server; the
		// ones that wait find it in the cache and only link.
		unlock, err := lockFile(r.path + ".lock")
		if err != nil {
			r.err = err
			os.Remove(tmp.Name())
			return
		}
		cmd := exec.Command("go", "build", "-race=false", "-o", tmp.Name(), importPath)
		r.out, r.err = cmd.CombinedOutput()
		unlock()
		took := time.Since(start).Round(time.Millisecond)
		if r.err != nil {
			fmt.Fprintf(buildLog, "coordtest: go build %s failed after %v\n", importPath, took)
		} else {
			fmt.Fprintf(buildLog, "coordtest: built %s in %v\n", importPath, took)
		}
		if r.err == nil {
			r.err = os.Rename(tmp.Name(), r.path)
		} else {
			os.Remove(tmp.Name())
		}
	})
	if r.err != nil {
		hint := ""
		if errors.Is(r.err, exec.ErrNotFound) {
			hint = "\nthe go command must be on PATH: tests build the servers they run as separate processes"
		}
		t.Fatalf("coordtest: go build %s: %v%s\n%s", importPath, r.err, hint, r.out)
	}
	return r.path
}

// lockFile takes an exclusive lock on the file at path (made if missing),
// blocking until other processes holding it release it; unlock releases it.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("coordtest: lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}
