package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// runChild runs the process side of a part: `coorddemo -child <role> args…`.
func runChild(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "coorddemo: -child needs a role")
		return 2
	}
	switch args[0] {
	case "scheduler":
		return runScheduler(args[1:])
	case "owner":
		return runOwner(args[1:])
	case "billing":
		return runBillingScheduler(args[1:])
	}
	fmt.Fprintf(os.Stderr, "coorddemo: unknown child role %q\n", args[0])
	return 2
}

// childConnect parses a child role's arguments, `<name> <etcd endpoint>
// <postgres url>`, and opens an etcd client and a PostgreSQL pool; the caller
// closes both. A non-zero code is the exit code (the reason was printed).
func childConnect(ctx context.Context, role string, args []string) (name string, cli *clientv3.Client, pool *pgxpool.Pool, code int) {
	fs := flag.NewFlagSet(role, flag.ContinueOnError)
	if err := fs.Parse(args); err != nil || fs.NArg() != 3 {
		fmt.Fprintf(os.Stderr, "usage: -child %s <name> <etcd endpoint> <postgres url>\n", role)
		return "", nil, nil, 2
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{fs.Arg(1)}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return "", nil, nil, 1
	}
	if pool, err = pgxpool.New(ctx, fs.Arg(2)); err != nil {
		cli.Close()
		fmt.Fprintln(os.Stderr, err)
		return "", nil, nil, 1
	}
	return fs.Arg(0), cli, pool, 0
}

// emit prints one event line for the parent: "EV <kind> <fields…>".
func emit(kind string, fields ...any) {
	parts := []string{"EV", kind}
	for _, f := range fields {
		parts = append(parts, fmt.Sprint(f))
	}
	fmt.Println(strings.Join(parts, " "))
}

// event is one line a child emitted.
type event struct {
	who    string
	kind   string
	fields []string
}

// child is a demo process the parent can freeze, resume and kill.
type child struct {
	name   string
	cmd    *exec.Cmd
	events chan event
}

// startChild re-executes this binary as `-child args…` and forwards its event
// lines to events (shared by all children of a part).
func startChild(name string, events chan event, args ...string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, append([]string{"-child"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{name: name, cmd: cmd, events: events}
	go c.forward(out)
	return c, nil
}

func (c *child) forward(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "EV" {
			c.events <- event{who: c.name, kind: f[1], fields: f[2:]}
		}
	}
}

func (c *child) freeze() error { return c.cmd.Process.Signal(syscall.SIGSTOP) }
func (c *child) resume() error { return c.cmd.Process.Signal(syscall.SIGCONT) }

func (c *child) kill() {
	c.cmd.Process.Signal(syscall.SIGCONT)
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

// await returns the next event matching want, or false after timeout.
func await(events <-chan event, timeout time.Duration, want func(event) bool) (event, bool) {
	deadline := time.After(timeout)
	for {
		select {
		case ev := <-events:
			if want(ev) {
				return ev, true
			}
		case <-deadline:
			return event{}, false
		}
	}
}
