package coordtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresServer is a private PostgreSQL instance started from the installed
// binaries in a temporary directory, for tests that must kill or restart the
// server. It runs as the "postgres" OS user when the test runs as root.
type PostgresServer struct {
	*Process
	// URL connects to its "postgres" database as the "postgres" user.
	URL string
	// Port is its TCP port on 127.0.0.1.
	Port int
}

// PrivatePostgres initdb's and starts a private server on a free port, waits until
// it accepts connections (at most 30 s) and stops it when the test ends.
func PrivatePostgres(t testing.TB) *PostgresServer {
	t.Helper()
	bin, err := postgresBinDir()
	if err != nil {
		missingBinary(t, err, "scripts/services.sh postgres-bin (Debian's package postgresql)")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	var attr *syscall.SysProcAttr
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("coordtest: running as root needs the postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		attr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		// t.TempDir's parents are root-only: give the server a world-traversable path.
		for p := filepath.Dir(dir); p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
			os.Chmod(p, 0o755)
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")
	initdb.SysProcAttr = attr
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("coordtest: initdb: %v\n%s", err, out)
	}
	port := FreePort(t)
	p := &Process{name: "postgres", path: filepath.Join(bin, "postgres"), attr: attr, out: &Buffer{},
		args: []string{"-D", data, "-p", strconv.Itoa(port), "-k", dir, "-c", "listen_addresses=127.0.0.1",
			"-c", "fsync=off", "-c", "max_connections=200"}}
	s := &PostgresServer{Process: p, Port: port,
		URL: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)}
	if err := p.Start(); err != nil {
		t.Fatalf("coordtest: start private postgres: %v", err)
	}
	t.Cleanup(func() {
		p.Terminate(10 * time.Second)
		if t.Failed() {
			t.Logf("output of private postgres:\n%s", p.Output())
		}
	})
	s.WaitReady(t, 30*time.Second)
	return s
}

// WaitReady waits until the server accepts a connection, or fails the test.
func (s *PostgresServer) WaitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	if !s.ready(s.Exited(), timeout) {
		t.Fatalf("coordtest: private postgres not ready after %v:\n%s", timeout, s.Output())
	}
}

// RestartCrash kills the server (SIGKILL: a crash, not a clean shutdown) and starts
// it again on the same data directory and port, waiting until it is ready.
func (s *PostgresServer) RestartCrash(t testing.TB) {
	t.Helper()
	s.Kill()
	// Orphaned backends notice the postmaster's death and exit; until they have,
	// a new postmaster refuses to start. Retry until one stays up.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := s.Start(); err != nil {
			t.Fatalf("coordtest: restart private postgres: %v", err)
		}
		if s.ready(s.Exited(), 10*time.Second) {
			return
		}
		s.Kill()
		if time.Now().After(deadline) {
			t.Fatalf("coordtest: private postgres did not restart:\n%s", s.Output())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ready polls until the server accepts a connection (true) or exited closes or
// the timeout passes (false).
func (s *PostgresServer) ready(exited <-chan struct{}, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, s.URL)
		cancel()
		if err == nil {
			c.Close(context.Background())
			return true
		}
		select {
		case <-exited:
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false
}

// postgresBinDir finds the directory holding initdb and postgres:
// COORD_TEST_POSTGRES_BIN, else the newest /usr/lib/postgresql/<version>/bin
// (Debian's layout), else the directory of postgres on PATH.
func postgresBinDir() (string, error) {
	has := func(dir string) bool {
		for _, name := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if dir := os.Getenv("COORD_TEST_POSTGRES_BIN"); dir != "" {
		if !has(dir) {
			return "", fmt.Errorf("COORD_TEST_POSTGRES_BIN=%s holds no initdb and postgres", dir)
		}
		return dir, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionLess(dirs[j], dirs[i]) }) // newest first
	for _, dir := range dirs {
		if has(dir) {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("postgres"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("PostgreSQL server binaries (initdb and postgres) are not in /usr/lib/postgresql/*/bin, nor on PATH, nor in COORD_TEST_POSTGRES_BIN")
}

// versionLess orders /usr/lib/postgresql/<version>/bin paths by version, so 10
// comes after 9.6.
func versionLess(a, b string) bool {
	va := strings.Split(filepath.Base(filepath.Dir(a)), ".")
	vb := strings.Split(filepath.Base(filepath.Dir(b)), ".")
	for i := 0; i < len(va) && i < len(vb); i++ {
		na, errA := strconv.Atoi(va[i])
		nb, errB := strconv.Atoi(vb[i])
		if errA != nil || errB != nil {
			if va[i] != vb[i] {
				return va[i] < vb[i]
			}
			continue
		}
		if na != nb {
			return na < nb
		}
	}
	return len(va) < len(vb)
}
