package pgfence_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// holderProc is the re-executed test binary in the holder role.
type holderProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr bytes.Buffer
	pauses int
}

func startHolder(t *testing.T, env ...string) *holderProc {
	t.Helper()
	h := &holderProc{lines: make(chan string, 1024)}
	h.cmd = exec.Command(os.Args[0], "-test.run=^$")
	h.cmd.Env = append(append(os.Environ(), roleEnv+"=holder"), env...)
	h.cmd.Stderr = &h.stderr
	var err error
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	t.Cleanup(func() {
		_ = h.cmd.Process.Signal(syscall.SIGCONT)
		_ = h.stdin.Close()
		exited := make(chan struct{})
		go func() { _ = h.cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = h.cmd.Process.Kill()
			<-exited
		}
		<-done
		if t.Failed() {
			t.Logf("holder stderr:\n%s", h.stderr.String())
		}
	})
	return h
}

// holderWorld is what the holder scenarios share: a fence in a fresh schema with
// the tables zombieWrite writes, a rival session on the test's etcd, and the
// holder child process on both servers, its backends named app.
type holderWorld struct {
	db    *coordtest.PostgresDB
	f     *pgfence.Fence
	rival *correctnesslease.Session
	h     *holderProc
	app   string
}

// newHolderWorld builds the world of a holder scenario. The holder's session is of
// rcfg's tenant with a TTL of ttl; its backends' application_name is appPrefix and
// the schema, this run's own: the server is shared, and another run of the test
// (another engineer's, a mutant's) has holder backends too ("17 holder backends
// idle in transaction, want 10").
func newHolderWorld(ctx context.Context, t *testing.T, fcfg pgfence.Config, rcfg correctnesslease.Config, appPrefix string, ttl time.Duration) holderWorld {
	t.Helper()
	etcd := coordtest.Etcd(t)
	db := coordtest.Postgres(t)
	f, err := pgfence.New(fcfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `
		CREATE TABLE writes (name text NOT NULL, writer text NOT NULL, revision bigint NOT NULL);
		CREATE TABLE rows (name text PRIMARY KEY, last_writer text NOT NULL, writes int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	rival, err := correctnesslease.NewSession(ctx, etcd.Client(t), rcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rival.Close(context.Background()) }) // after the holder's cleanup
	app := appPrefix + "-" + db.Schema
	h := startHolder(t,
		envEtcd+"="+strings.Join(etcd.Endpoints, ","), envPG+"="+db.URL+"&application_name="+app,
		envTenant+"="+rcfg.Tenant, envTTL+"="+ttl.String())
	return holderWorld{db: db, f: f, rival: rival, h: h, app: app}
}

// roundNames returns the n lease names of round r, prefix-000 on.
func roundNames(prefix string, r, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%03d", prefix, r*n+i)
	}
	return names
}

// stop SIGSTOPs the holder, waits until it is stopped (SIGSTOP is asynchronous)
// and sends it "go", buffered in the pipe: read only after SIGCONT. It returns
// when the holder was stopped.
func (h *holderProc) stop(t *testing.T) time.Time {
	t.Helper()
	if err := h.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	h.pauses++
	stopped := time.Now()
	coordtest.WaitStopped(t, h.cmd.Process.Pid, 10*time.Second)
	h.send(t, "go")
	return stopped
}

// rivalsWrite acquires every name on the rival session at once (each Acquire
// returns once etcd has expired the stopped holder), checks that each token is
// newer than the holder's in held, and runs write with the lease, which is
// released after. It fails the test with the first error, showing what every
// backend does, once all are done; what names them in the failure of the wait.
func (w holderWorld) rivalsWrite(ctx context.Context, t *testing.T, names []string, held map[string]coord.Token, what string, write func(l *correctnesslease.Lease, name string) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	for _, n := range names {
		wg.Go(func() {
			l, err := correctnesslease.Acquire(ctx, w.rival, n)
			if err != nil {
				errs <- fmt.Errorf("rival acquire %s: %w", n, err)
				return
			}
			defer l.Release(context.WithoutCancel(ctx))
			if c, ok := l.Token().Compare(held[n]); !ok || c <= 0 {
				errs <- fmt.Errorf("rival token %s not newer than the holder's %s", l.Token(), held[n])
				return
			}
			if err := write(l, n); err != nil {
				errs <- err
			}
		})
	}
	coordtest.Wait(t, &wg, 60*time.Second, what)
	close(errs)
	for err := range errs {
		dumpActivity(t, w.db)
		t.Fatal(err)
	}
}

// hold sends "<cmd> <names>" and reads the holder's "<reply> <name> <token>"
// lines up to "ready": the tokens it holds, by name.
func (h *holderProc) hold(t *testing.T, cmd, reply string, names []string) map[string]coord.Token {
	t.Helper()
	h.send(t, cmd+" "+strings.Join(names, ","))
	held := map[string]coord.Token{}
	for {
		got, args := h.next(t)
		if got == "ready" {
			return held
		}
		if got != reply || len(args) != 2 {
			t.Fatalf("holder said %s %v, want %s <name> <token>", got, args, reply)
		}
		tok, err := coord.ParseToken(args[1])
		if err != nil {
			t.Fatalf("holder said %s %v: %v", got, args, err)
		}
		held[args[0]] = tok
	}
}

func (h *holderProc) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(h.stdin, line+"\n"); err != nil {
		t.Fatalf("write to holder: %v", err)
	}
}

// next returns the holder's next line, failing on exit, "fatal" or timeout.
func (h *holderProc) next(t *testing.T) (cmd string, args []string) {
	t.Helper()
	select {
	case l, ok := <-h.lines:
		if !ok {
			t.Fatalf("holder exited: %s", h.stderr.String())
		}
		f := strings.Fields(l)
		if len(f) == 0 || f[0] == "fatal" {
			t.Fatalf("holder: %s", l)
		}
		return f[0], f[1:]
	case <-time.After(60 * time.Second):
		t.Fatal("holder silent for 60s")
	}
	return "", nil
}

// TestPausedHolderWritesAreRejected is the GC-pause double charge, with a real
// pause: the holder (a child process) holds correctnesslease leases, passes its
// leadership check and is SIGSTOPped before its write, past the 2 s TTL; a rival
// acquires each lease and writes; the holder is SIGCONTed and its writes arrive
// with the old tokens. Every one must be rejected, by the database and by the
// metric. Each round pauses the holder once over several lease names (one trial
// each), so 50 trials take about five TTLs.
func TestPausedHolderWritesAreRejected(t *testing.T) {
	t.Parallel()
	res := coordtest.NewResult(t, "paused (SIGSTOP) lease holder's writes are fenced off", coordtest.Faults("holder SIGSTOPped past the TTL"))
	defer coordtest.Report(t, res)
	const ttl = correctnesslease.MinTTL
	rounds, perRound := 5, 10
	if r := os.Getenv("PGFENCE_ROUNDS"); r != "" {
		rounds, _ = strconv.Atoi(r)
	}
	if coordtest.Full() {
		rounds = 30
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(max(rounds, 1))*30*time.Second)
	defer cancel()
	w := newHolderWorld(ctx, t, pgfence.Config{}, correctnesslease.Config{Tenant: "paused", TTL: 10 * time.Second}, "pgfence-holder", ttl)
	db, f, h := w.db, w.f, w.h

	var trials, attempted, rejected, metric int
	var stoppedFor []time.Duration
	start := time.Now()
	for r := 0; r < rounds; r++ {
		names := roundNames("trial", r, perRound)
		held := h.hold(t, "round", "checked", names)
		// The holder passed its leadership check and now waits to write: freeze it.
		stopped := h.stop(t)
		w.rivalsWrite(ctx, t, names, held, "the rivals acquiring and writing while the holder is stopped", func(l *correctnesslease.Lease, n string) error {
			if err := zombieWrite(ctx, f, db.Pool, l.Token(), n, "rival"); err != nil {
				return fmt.Errorf("rival write %s: %w", n, err)
			}
			return nil
		})
		if st, err := coordtest.ProcessState(h.cmd.Process.Pid); err != nil || st != 'T' {
			t.Fatalf("holder state %q (%v) after the rivals wrote, want T (stopped)", st, err)
		}
		stoppedFor = append(stoppedFor, time.Since(stopped))
		if err := h.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		for {
			cmd, args := h.next(t)
			switch cmd {
			case "result":
				trials++
				attempted++
				if args[1] == "rejected" {
					rejected++
				} else {
					t.Errorf("trial %s: the paused holder's write was %s", args[0], strings.Join(args[1:], " "))
				}
			case "metric":
				metric, _ = strconv.Atoi(args[0])
			}
			if cmd == "done" {
				break
			}
		}
	}

	var zombieRows, rivalRows, rowsRival int
	if err := db.Pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM writes WHERE writer = 'zombie'),
		(SELECT count(*) FROM writes WHERE writer = 'rival'),
		(SELECT count(*) FROM rows WHERE last_writer = 'rival' AND writes = 2)`).Scan(&zombieRows, &rivalRows, &rowsRival); err != nil {
		t.Fatal(err)
	}
	shortest, longest := durRange(stoppedFor)
	t.Logf("paused holder: %d rounds x %d names in %v; holder SIGSTOPped %d times for %v..%v each; "+
		"zombie writes attempted %d, stale writes accepted %d, rejected %d, coordkit.pgfence.rejected %d",
		rounds, perRound, time.Since(start).Round(time.Millisecond), h.pauses, shortest, longest,
		attempted, zombieRows, rejected, metric)
	res.Trials = trials
	res.Faults["holder SIGSTOPped past the TTL"] = h.pauses
	res.Outcome["zombie writes attempted"] = int64(attempted)
	res.Outcome["stale writes accepted"] = int64(zombieRows)
	res.Outcome["stale writes rejected"] = int64(rejected)
	res.Outcome["coordkit.pgfence.rejected counted"] = int64(metric)
	res.Outcome["rival writes"] = int64(rivalRows)
	res.Notes = fmt.Sprintf("%d rounds x %d lease names, TTL %v; holder stopped %v..%v per round",
		rounds, perRound, ttl, shortest, longest)
	want := rounds * perRound
	switch {
	case h.pauses != rounds || attempted != want:
		t.Fatalf("faults: %d pauses, %d zombie writes attempted; want %d and %d", h.pauses, attempted, rounds, want)
	case zombieRows != 0:
		t.Fatalf("%d stale writes accepted", zombieRows)
	case rivalRows != want || rowsRival != want:
		t.Fatalf("rival writes %d, rows last written by the rival %d; want %d", rivalRows, rowsRival, want)
	case rejected != want || metric != want:
		t.Fatalf("rejections %d, counted by coordkit.pgfence.rejected %d; want %d", rejected, metric, want)
	}
}

// durRange returns the shortest and the longest of ds, to the millisecond (0 and
// 0 for none).
func durRange(ds []time.Duration) (shortest, longest time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	return slices.Min(ds).Round(time.Millisecond), slices.Max(ds).Round(time.Millisecond)
}

// dumpActivity logs what every backend is doing, to explain a stuck write.
func dumpActivity(t *testing.T, db *coordtest.PostgresDB) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := db.Pool.Query(ctx, `SELECT pid, state || ' app=' || application_name, coalesce(wait_event_type,''), left(query, 120),
		coalesce(now() - xact_start, '0'::interval)::text FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		t.Logf("pg_stat_activity: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		var state, wait, query, age string
		_ = rows.Scan(&pid, &state, &wait, &query, &age)
		t.Logf("backend %d %s wait=%s xact_age=%s: %s", pid, state, wait, age, query)
	}
}
