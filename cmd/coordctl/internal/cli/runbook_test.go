package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/cli"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/testenv"
)

// runbookBlock is a code block of a runbook marked "<!-- tested: NAME -->":
// its coordctl command lines.
type runbookBlock struct {
	name     string
	commands []string
}

// runbookBlocks reads the tested blocks of docs/runbooks/<file>.
func runbookBlocks(t *testing.T, file string) []runbookBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "runbooks", file))
	if err != nil {
		t.Fatal(err)
	}
	var out []runbookBlock
	var cur *runbookBlock
	inCode := false
	for _, line := range strings.Split(string(b), "\n") {
		l := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(l, "<!-- tested: "):
			out = append(out, runbookBlock{name: strings.TrimSuffix(strings.TrimPrefix(l, "<!-- tested: "), " -->")})
			cur = &out[len(out)-1]
		case strings.HasPrefix(l, "```") && cur != nil:
			if inCode {
				cur, inCode = nil, false
			} else {
				inCode = true
			}
		case inCode && strings.HasPrefix(l, "coordctl "):
			cur.commands = append(cur.commands, l)
		}
	}
	return out
}

// shellWords splits a command line as sh would for these runbooks: words,
// double-quoted strings, a trailing # comment dropped.
func shellWords(line string) []string {
	var out []string
	var w strings.Builder
	inQuote, inWord := false, false
	for _, r := range line {
		switch {
		case r == '"':
			inQuote, inWord = !inQuote, true
		case (r == ' ' || r == '\t') && !inQuote:
			if inWord {
				out = append(out, w.String())
				w.Reset()
				inWord = false
			}
		case r == '#' && !inQuote && !inWord:
			return out
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, w.String())
	}
	return out
}

// runRunbook runs every tested block of a runbook in order, with its
// placeholders ($SAGA, $EVENT, $KEY, $ERROR) replaced by what vars gives for
// the block; every command must exit 0. It returns the blocks it ran.
func runRunbook(t *testing.T, r *runner, file string, vars map[string]map[string]string) []string {
	t.Helper()
	var ran []string
	for _, b := range runbookBlocks(t, file) {
		if len(b.commands) == 0 {
			t.Fatalf("%s: tested block %q has no coordctl command", file, b.name)
		}
		for _, c := range b.commands {
			for k, v := range vars[b.name] {
				c = strings.ReplaceAll(c, "$"+k, v)
			}
			if strings.Contains(c, "$") {
				t.Fatalf("%s, block %s: %q has a placeholder the test does not fill", file, b.name, c)
			}
			out, errs, code := r.run(shellWords(c)[1:]...)
			if code != cli.ExitOK {
				t.Fatalf("%s, block %s: %s: exit %d\n%s%s", file, b.name, c, code, out, errs)
			}
		}
		ran = append(ran, b.name)
	}
	return ran
}

// TestRunbooksNameTheCommandThatFixes (issue 29, point 6): the runbooks of a
// stuck compensation and a stopped outbox did not mention coordctl. Each fix
// now names its coordctl command and its console click, and every command is
// run here, as written, against a world in that state, with its effect checked.
func TestRunbooksNameTheCommandThatFixes(t *testing.T) {
	e := testenv.Seeded(t)
	e.StartMany(t, 3, "refund", "refund", "needs_human", "ledger: account 9921 is LOCKED")
	e.StartMany(t, 40, "payout", "payout", "compensating", "ledger: account 4411 is LOCKED")
	e.ParkMany(t, 20, "invoice-batch-42", "schema registry: subject orders-value not found")
	e.ParkMany(t, 1, "broken-deploy", "broker: topic test-only does not exist")
	r := newRunner(t, e)
	var poison string
	if err := e.DB.Pool.QueryRow(testenv.Ctx(t), `SELECT id FROM coord_outbox_parked WHERE aggregateid = 'broken-deploy'`).Scan(&poison); err != nil {
		t.Fatal(err)
	}
	state := func(id string) (st string, due bool) {
		t.Helper()
		if err := e.DB.Pool.QueryRow(testenv.Ctx(t), `SELECT state, next_attempt_at <= now() FROM coord_sagas WHERE id = $1`, id).Scan(&st, &due); err != nil {
			t.Fatal(err)
		}
		return st, due
	}
	count := func(q string) int {
		t.Helper()
		var n int
		if err := e.DB.Pool.QueryRow(testenv.Ctx(t), q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	ran := runRunbook(t, r, "stuck-compensation.md", map[string]map[string]string{
		"find":    {"SAGA": testenv.HumanSaga},
		"retry":   {"SAGA": testenv.HumanSaga},
		"by-hand": {"SAGA": "refund-0000001"},
		"many":    {"ERROR": "account 4411"},
	})
	if strings.Join(ran, " ") != "find retry by-hand many" {
		t.Fatalf("stuck-compensation.md's tested blocks: %v", ran)
	}
	if st, _ := state(testenv.HumanSaga); st != "compensating" {
		t.Fatalf("after the runbook's resolve --how retry, %s is %s", testenv.HumanSaga, st)
	}
	if st, _ := state("refund-0000001"); st != "compensated" {
		t.Fatalf("after the runbook's resolve --how compensated, refund-0000001 is %s", st)
	}
	if n := count(`SELECT count(*) FROM coord_sagas WHERE id LIKE 'payout-%' AND next_attempt_at <= now()`); n != 40 {
		t.Fatalf("after the runbook's bulk retry, %d of 40 compensating sagas are due", n)
	}

	ran = runRunbook(t, r, "stopped-outbox.md", map[string]map[string]string{
		"find":  {"ERROR": "schema registry"},
		"one":   {"EVENT": e.ParkedID.String()},
		"key":   {"KEY": "invoice-batch-42"},
		"never": {"EVENT": poison},
	})
	if strings.Join(ran, " ") != "find one key never" {
		t.Fatalf("stopped-outbox.md's tested blocks: %v", ran)
	}
	if n := count(`SELECT count(*) FROM coord_outbox_parked`); n != 0 {
		t.Fatalf("after the stopped-outbox runbook, %d events are still parked", n)
	}
	if n := count(`SELECT count(*) FROM coordctl_audit WHERE outcome = 'applied'`); n != 6 {
		t.Fatalf("the runbooks' changes wrote %d audit rows, want 6 (2 resolves, 1 bulk retry, 1 requeue, 1 bulk requeue, 1 discard)", n)
	}

	for _, f := range []string{"etcd-no-leader.md", "etcd-leader-changes.md", "etcd-wal-fsync.md", "etcd-db-size.md"} {
		if ran := runRunbook(t, r, f, nil); len(ran) == 0 {
			t.Errorf("%s has no tested coordctl command", f)
		}
	}
	for _, f := range []string{"stuck-compensation.md", "stopped-outbox.md", "etcd-no-leader.md", "etcd-leader-changes.md", "etcd-wal-fsync.md", "etcd-db-size.md"} {
		b, _ := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "runbooks", f))
		if !strings.Contains(string(b), "Console: ") {
			t.Errorf("%s does not say where the console does it", f)
		}
	}
}
