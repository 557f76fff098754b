package cli_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/cli"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/testenv"
)

// closedAddr is a loopback address nothing listens on (a port bound, then
// released).
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// TestOverviewWhenBlindSaysUnknownAndExitsNonZero (issue 29, point 1): with
// PostgreSQL unreachable the overview does not print "Needs a human: 0" and
// exit 0; every figure it could not read is UNKNOWN with its cause (JSON null),
// and the command exits ExitBlind. With etcd down too, it says so within the
// part timeout instead of waiting out the command timeout.
func TestOverviewWhenBlindSaysUnknownAndExitsNonZero(t *testing.T) {
	e := testenv.Seeded(t)
	r := newRunner(t, e)
	r.env["DATABASE_URL"] = "postgres://postgres@" + closedAddr(t) + "/postgres?sslmode=disable&connect_timeout=1"

	out, errs, code := r.run("overview")
	if code != cli.ExitBlind {
		t.Fatalf("overview with PostgreSQL down: exit %d, want %d (blind)\n%s%s", code, cli.ExitBlind, out, errs)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"Needs a human: UNKNOWN (sagas could not be read", "Outbox: UNKNOWN (outbox could not be read", "Leases held: 2"} {
		if !strings.Contains(flat, want) {
			t.Fatalf("overview with PostgreSQL down lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(flat, "Needs a human: 0") || !strings.Contains(errs, "blind") {
		t.Fatalf("overview with PostgreSQL down shows a zero or no warning:\n%s\nstderr: %s", out, errs)
	}
	outJSON, errJSON, code := r.run("overview", "-o", "json")
	var ov admin.Overview
	if err := json.Unmarshal([]byte(outJSON), &ov); err != nil || code != cli.ExitBlind {
		t.Fatalf("overview -o json: exit %d, %v\n%s", code, err, outJSON)
	}
	if ov.NeedsHuman != nil || ov.Sagas != nil || ov.Outbox != nil || ov.Errors["sagas"] == "" || ov.LeasesHeld == nil {
		t.Fatalf("overview -o json with PostgreSQL down = %+v: want sagas and outbox null with their errors, leases known", ov)
	}
	var je struct {
		Kind     string `json:"kind"`
		ExitCode int    `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(errJSON), &je); err != nil || je.Kind != "partial" || je.ExitCode != cli.ExitBlind {
		t.Fatalf("overview -o json's error is not JSON naming the partial view: %v %q", err, errJSON)
	}
	if !strings.Contains(strings.ToLower(errJSON), "null") && !strings.Contains(outJSON, `"needs_human": null`) {
		t.Fatalf("needs_human is not null in %s", outJSON)
	}

	// etcd down as well: every part unknown, within the part timeout.
	r.env["ETCDCTL_ENDPOINTS"] = closedAddr(t)
	start := time.Now()
	out, _, code = r.run("overview")
	if code != cli.ExitBlind || !strings.Contains(out, "UNKNOWN (leases could not be read") || !strings.Contains(out, "UNKNOWN (members could not be read") {
		t.Fatalf("overview with etcd and PostgreSQL down: exit %d\n%s", code, out)
	}
	if took := time.Since(start); took > admin.DefaultPartTimeout+3*time.Second {
		t.Fatalf("overview with etcd down took %v: want the part timeout (%v), not the command timeout", took, admin.DefaultPartTimeout)
	}

	// A list whose second source is down: printed, the unknown said, exit blind.
	r = newRunner(t, e)
	r.env["DATABASE_URL"] = "postgres://postgres@" + closedAddr(t) + "/postgres?sslmode=disable&connect_timeout=1"
	out, errs, code = r.run("leases", "list")
	if code != cli.ExitBlind || !strings.Contains(out, testenv.LeaseName) || !strings.Contains(errs, "fences") {
		t.Fatalf("leases list with the fence table unreadable: exit %d\n%s%s", code, out, errs)
	}
}

// TestArgumentsSubcommandsAndTerminals (issue 29, point 6): unknown or missing
// subcommands fail with exit 2 instead of printing help and exiting 0; bad
// arguments are exit 2 (never a raw SQL error); `saga resolve --how` is checked
// before the prompt; /dev/null is no terminal; a fence reset refuses a name that
// is no coordkit lease, or has no fence row, instead of creating one; -o json
// errors are JSON.
func TestArgumentsSubcommandsAndTerminals(t *testing.T) {
	e := testenv.Seeded(t)
	r := newRunner(t, e)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"saga", "bogus"}, cli.ExitUsage, `unknown subcommand "bogus"`},
		{[]string{"saga"}, cli.ExitUsage, "needs a subcommand"},
		{[]string{"outbox", "parked", "nope"}, cli.ExitUsage, "unknown subcommand"},
		{[]string{"bogus"}, cli.ExitUsage, "unknown command"},
		{[]string{"saga", "list", "--bogus"}, cli.ExitUsage, "unknown flag"},
		{[]string{"saga", "get", "order\x00-1"}, cli.ExitUsage, "control character"},
		{[]string{"saga", "get", "order\xff"}, cli.ExitUsage, "not valid UTF-8"},
		{[]string{"idem", "get", "acme", "k\x00"}, cli.ExitUsage, "control character"},
		{[]string{"outbox", "parked", "requeue", "not-a-uuid", "--reason", "r", "--confirm"}, cli.ExitUsage, "invalid event id"},
		{[]string{"saga", "list", "--limit", "-1"}, cli.ExitUsage, "limit"},
		{[]string{"fences", "reset", "billing", "--to", "5", "--reason", "r", "--confirm"}, cli.ExitUsage, "not a coordkit lease"},
		{[]string{"fences", "reset", "/tenants/acme/elections/nobody", "--to", "5", "--reason", "r", "--confirm"}, cli.ExitError, "no fence row: nothing to reset"},
	} {
		out, errs, code := r.run(c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("coordctl %q: exit %d (want %d), stderr %q (want %q), stdout %q", c.args, code, c.code, errs, c.want, out)
		}
	}
	var phantom int
	if err := e.DB.Pool.QueryRow(testenv.Ctx(t), `SELECT count(*) FROM coord_fences WHERE lease IN ('billing', '/tenants/acme/elections/nobody')`).Scan(&phantom); err != nil || phantom != 0 {
		t.Fatalf("fence reset of unknown names left %d rows (%v): want none", phantom, err)
	}

	// --how is checked before the saga is shown and "yes" is asked for.
	r.tty, r.in = true, "yes\n"
	_, errs, code := r.run("saga", "resolve", testenv.HumanSaga, "--how", "bogus", "--reason", "r")
	if code != cli.ExitUsage || strings.Contains(errs, "Type yes") {
		t.Fatalf("resolve --how bogus on a terminal: exit %d, stderr %q: want exit 2 before any prompt", code, errs)
	}
	r.tty, r.in = false, ""

	// /dev/null is a character device, not a terminal: no prompt, a refusal.
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	var out, errb strings.Builder
	code = cli.Main(context.Background(), []string{"saga", "retry", testenv.StuckSaga, "--reason", "r"}, cli.IO{In: devnull, Out: &out, Err: &errb,
		Getenv: func(k string) string { return r.env[k] }})
	if code != cli.ExitRefused || strings.Contains(errb.String(), "Type yes") {
		t.Fatalf("retry with stdin </dev/null: exit %d, stderr %q: want a refusal without a prompt", code, errb.String())
	}

	// -o json: the error is JSON too.
	_, errs, code = r.run("saga", "get", "nope", "-o", "json")
	var je struct {
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
		Kind     string `json:"kind"`
	}
	if err := json.Unmarshal([]byte(errs), &je); err != nil || code != cli.ExitError || je.ExitCode != code || !strings.Contains(je.Error, "not found") {
		t.Fatalf("saga get nope -o json: exit %d, stderr %q is not a JSON error (%v)", code, errs, err)
	}
}
