package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/user"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/cli"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/testenv"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// runner runs coordctl against an Env, as a user's shell would.
type runner struct {
	t   *testing.T
	env map[string]string
	tty bool
	in  string
}

func newRunner(t *testing.T, e *testenv.Env) *runner {
	return &runner{t: t, env: map[string]string{
		"ETCDCTL_ENDPOINTS": strings.Join(e.Etcd.Endpoints, ","),
		"DATABASE_URL":      e.DB.URL,
		"COORDCTL_ACTOR":    "alice@oncall",
	}}
}

// run returns stdout, stderr and the exit code.
func (r *runner) run(args ...string) (string, string, int) {
	r.t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(context.Background(), args, cli.IO{
		In: strings.NewReader(r.in), Out: &out, Err: &errb,
		Getenv:     func(k string) string { return r.env[k] },
		IsTerminal: func() bool { return r.tty },
	})
	return out.String(), errb.String(), code
}

// decode runs a command with -o json and decodes its output into v.
func (r *runner) decode(v any, args ...string) {
	r.t.Helper()
	out, errs, code := r.run(append(args, "-o", "json")...)
	if code != cli.ExitOK {
		r.t.Fatalf("coordctl %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		r.t.Fatalf("coordctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestReadCommandsAgainstRealServers runs every read command against the seeded
// world and checks what it reports, in JSON and as a table.
func TestReadCommandsAgainstRealServers(t *testing.T) {
	e := testenv.Seeded(t)
	r := newRunner(t, e)
	tok := e.Holder.Token()

	var leases []admin.Lease
	r.decode(&leases, "leases", "list")
	if len(leases) != 2 || leases[0].Name != testenv.LeaseName || leases[0].SinceRevision != tok.Revision() || leases[0].Waiters != 1 ||
		leases[0].FenceHighest != tok.Revision() || !strings.Contains(leases[0].Holder, " pid ") || leases[1].Name != testenv.OtherLease {
		t.Fatalf("leases list = %+v", leases)
	}
	var lease admin.Lease
	r.decode(&lease, "leases", "get", testenv.Tenant, testenv.LeaseName)
	if lease.Token != tok.String() || len(lease.Queue) != 2 || lease.Queue[0].CreateRevision != tok.Revision() {
		t.Fatalf("leases get = %+v (token %s)", lease, tok)
	}
	var svcs []admin.Service
	r.decode(&svcs, "members")
	st0 := e.Members[0].Status()
	if len(svcs) != 2 || svcs[0].Service != testenv.MemberService || svcs[1].Service != testenv.OtherService || len(svcs[0].Members) != 2 ||
		svcs[0].Members[0].Instance != "checkout-7d9f" || svcs[0].Members[0].Addr != "10.0.0.7:8080" || svcs[0].Members[0].Metadata["zone"] != "eu-west-1a" ||
		svcs[0].Members[0].LeaseID != strconv.FormatInt(int64(st0.Lease), 16) || svcs[0].Members[0].SinceRevision != st0.CreateRevision || len(svcs[0].Malformed) != 0 {
		t.Fatalf("members = %+v (registration %+v): want both services, and not correctnesslease's session keys", svcs, st0)
	}
	r.decode(&svcs, "members", testenv.Tenant, testenv.OtherService)
	if len(svcs) != 1 || len(svcs[0].Members) != 1 || svcs[0].Members[0].Instance != "ledger-0" {
		t.Fatalf("members %s %s = %+v", testenv.Tenant, testenv.OtherService, svcs)
	}
	r.decode(&svcs, "members", "globex")
	if len(svcs) != 0 {
		t.Fatalf("members of a tenant without any = %+v", svcs)
	}
	var fences []admin.Fence
	r.decode(&fences, "fences", "list", "--prefix", "/tenants/acme/")
	if len(fences) != 1 || fences[0].Lease != tok.Lease() || fences[0].Highest != tok.Revision() {
		t.Fatalf("fences list = %+v", fences)
	}
	var st admin.OutboxStatus
	r.decode(&st, "outbox", "status")
	if st.Pending != 1 || st.Parked != 1 || len(st.ParkedKeys) != 1 || st.ParkedKeys[0].Key != testenv.PoisonKey || st.ParkedKeys[0].Blocked != 1 || st.PublishedInWindow != 1 {
		t.Fatalf("outbox status = %+v", st)
	}
	var pp admin.ParkedPage
	r.decode(&pp, "outbox", "parked", "list")
	if parked := pp.Events; len(parked) != 1 || parked[0].ID != e.ParkedID.String() || parked[0].LastError != testenv.ParkedError || parked[0].Attempts != 2 ||
		pp.Total != 1 || pp.Counts["parked"] != 1 || pp.Counts["pending"] != 1 {
		t.Fatalf("parked list = %+v", pp)
	}
	var sp admin.SagaPage
	r.decode(&sp, "saga", "list", "--state", "needs_human")
	if sagas := sp.Sagas; len(sagas) != 1 || sagas[0].ID != testenv.HumanSaga || sagas[0].StepName != "debit" || sagas[0].LastError != testenv.RefundFailed ||
		sp.Total != 1 || sp.Counts["running"] != 1 || sp.Counts["needs_human"] != 1 {
		t.Fatalf("saga list --state needs_human = %+v", sp)
	}
	var sg admin.Saga
	r.decode(&sg, "saga", "get", testenv.StuckSaga)
	if sg.State != "running" || sg.StepName != "charge-card" || len(sg.Steps) != 4 || sg.Steps[1].Status != "current" || sg.Steps[1].Failures != 1 ||
		sg.Steps[1].LastError != testenv.StuckError || sg.Steps[2].Kind != "pivot" || sg.Version == "" {
		t.Fatalf("saga get = %+v", sg)
	}
	var k admin.IdemKey
	r.decode(&k, "idem", "get", testenv.IdemScope, testenv.IdemKey)
	if k.State != "completed" || k.ResponseStatus != 201 || k.ResponseHeader.Get("Location") != "/payments/981" || k.ResponseBytes != 10 {
		t.Fatalf("idem get = %+v", k)
	}
	var cfg admin.ConfigRead
	r.decode(&cfg, "config", "get", testenv.Tenant, testenv.ConfigName)
	if len(cfg.Entries) != 1 || !strings.Contains(cfg.Entries[0].Value, `"new_checkout":false`) || cfg.Entries[0].Version != 2 {
		t.Fatalf("config get = %+v", cfg)
	}
	var stale admin.Staleness
	r.decode(&stale, "config", "staleness", e.StateFile)
	if !stale.Behind || stale.Keys != 1 || stale.EtcdModRevision <= stale.Revision || stale.StalenessSeconds < 0 {
		t.Fatalf("config staleness = %+v: the file predates the last put, so it is behind", stale)
	}
	var ov admin.Overview
	r.decode(&ov, "overview")
	if ov.LeasesHeld == nil || *ov.LeasesHeld != 2 || *ov.LeasesWaiting != 1 || *ov.Members != 3 || *ov.Services != 2 || ov.NeedsHuman == nil || *ov.NeedsHuman != 1 ||
		ov.Outbox == nil || ov.Outbox.Parked != 1 || len(ov.Errors) != 0 {
		t.Fatalf("overview = %+v", ov)
	}

	// The table form of the same: headers and the values an operator looks for.
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"leases", "list"}, []string{"TENANT", "WAITERS", testenv.LeaseName, "rev " + itoa(tok.Revision())}},
		{[]string{"members", testenv.Tenant}, []string{"acme/checkout (2 members", "INSTANCE", "version=v1.42.0 zone=eu-west-1b", "rev " + itoa(st0.CreateRevision)}},
		{[]string{"saga", "get", testenv.HumanSaga}, []string{"STEPS", "stuck", testenv.RefundFailed, "needs_human"}},
		{[]string{"outbox", "parked", "list"}, []string{"LAST ERROR", testenv.ParkedError}},
		{[]string{"idem", "get", testenv.IdemScope, testenv.IdemKey}, []string{"Location: /payments/981"}},
	} {
		out, errs, code := r.run(c.args...)
		for _, w := range c.want {
			if code != 0 || !strings.Contains(out, w) {
				t.Fatalf("coordctl %s (exit %d) lacks %q:\n%s%s", strings.Join(c.args, " "), code, w, out, errs)
			}
		}
	}

	// Unknown objects and bad input: a clear error, a non-zero exit.
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"saga", "get", "nope"}, cli.ExitError, "not found"},
		{[]string{"idem", "get", "acme", "nope"}, cli.ExitError, "not found"},
		{[]string{"leases", "get", "acme", "a/b"}, cli.ExitUsage, "name"},
		{[]string{"fences", "get", "bad\x01lease"}, cli.ExitUsage, "control character"},
		{[]string{"saga", "list", "--state", "bogus"}, cli.ExitUsage, "unknown state"},
		{[]string{"saga", "get"}, cli.ExitUsage, "takes 1 argument"},
		{[]string{"members", "acme", "a/b"}, cli.ExitUsage, "invalid config service"},
		{[]string{"members", "acme", "checkout", "extra"}, cli.ExitUsage, "takes [TENANT [SERVICE]]"},
		{[]string{"overview", "-o", "yaml"}, cli.ExitUsage, "want table or json"},
		{[]string{"config", "staleness", "/nonexistent/state"}, cli.ExitError, "no such file"},
	} {
		_, errs, code := r.run(c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Fatalf("coordctl %s: exit %d (want %d), stderr %q (want %q)", strings.Join(c.args, " "), code, c.code, errs, c.want)
		}
	}
}

// TestOwnershipMapAgainstRealServers reads the ownership groups a real etcd
// holds: a settled group (partition → owner and its token, as the members see
// them) and one whose member has gone (every partition unowned).
func TestOwnershipMapAgainstRealServers(t *testing.T) {
	e := testenv.New(t)
	e.SeedOwnership(t)
	r := newRunner(t, e)
	var ms []admin.OwnershipMap
	r.decode(&ms, "ownership", "map")
	if len(ms) != 2 || ms[0].Group != testenv.OwnedGroup || ms[1].Group != testenv.AbandonedGroup {
		t.Fatalf("ownership map = %+v", ms)
	}
	g := ms[0]
	if g.Partitions != testenv.OwnedPartitions || g.Unowned != 0 || g.Moving != 0 || len(g.Members) != 2 || g.Members[0].Owns+g.Members[1].Owns != testenv.OwnedPartitions {
		t.Fatalf("%s: %+v", testenv.OwnedGroup, g)
	}
	for _, p := range g.Owners {
		if p.Owner == "" || p.SinceRevision == 0 || !strings.HasSuffix(p.Lease, ".invoices."+strconv.Itoa(p.Partition)) {
			t.Fatalf("partition %+v", p)
		}
	}
	// The members' own view agrees with the map. A member records a partition
	// an instant after its key is in etcd (where the map reads it), so its view
	// is given time to catch up.
	held := map[string]string{} // token -> owner, from the members themselves
	agrees := func() bool {
		clear(held)
		for _, m := range e.Owners {
			for _, p := range m.Owned() {
				held[p.Token().String()] = m.ID()
			}
		}
		for _, p := range g.Owners {
			if held[p.Token] != p.Owner {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(10 * time.Second); !agrees(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s the members still do not hold what the map says: map %+v, the members hold %v", g.Owners, held)
		}
	}
	if a := ms[1]; a.Partitions != testenv.AbandonedPartitions || a.Unowned != testenv.AbandonedPartitions || len(a.Members) != 0 || a.Moving != testenv.AbandonedPartitions {
		t.Fatalf("%s (its member closed): %+v", testenv.AbandonedGroup, a)
	}
	r.decode(&ms, "ownership", "map", testenv.Tenant, testenv.AbandonedGroup)
	if len(ms) != 1 || ms[0].Group != testenv.AbandonedGroup {
		t.Fatalf("ownership map %s %s = %+v", testenv.Tenant, testenv.AbandonedGroup, ms)
	}
	out, errs, code := r.run("ownership", "map", testenv.Tenant)
	for _, w := range []string{"acme/" + testenv.OwnedGroup, "PARTITIONS", "(unowned)", "Unowned:           " + strconv.Itoa(testenv.AbandonedPartitions), g.Owners[0].Token} {
		if code != cli.ExitOK || !strings.Contains(out, w) {
			t.Fatalf("ownership map (exit %d) lacks %q:\n%s%s", code, w, out, errs)
		}
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"ownership", "map", "acme", "a/b"}, cli.ExitUsage, "invalid config Group"},
		{[]string{"ownership", "map", "a", "b", "c"}, cli.ExitUsage, "takes [TENANT [GROUP]]"},
	} {
		if _, errs, code := r.run(c.args...); code != c.code || !strings.Contains(errs, c.want) {
			t.Fatalf("coordctl %s: exit %d (want %d), stderr %q (want %q)", strings.Join(c.args, " "), code, c.code, errs, c.want)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// sagaRow reads what a mutation may change.
func sagaRow(t *testing.T, e *testenv.Env, id string) (state string, updated string) {
	t.Helper()
	if err := e.DB.Pool.QueryRow(testenv.Ctx(t), `SELECT state, updated_at::text FROM coord_sagas WHERE id = $1`, id).Scan(&state, &updated); err != nil {
		t.Fatal(err)
	}
	return state, updated
}

func auditRows(t *testing.T, e *testenv.Env) []string {
	t.Helper()
	return coordtest.TextRows(t, e.DB.Pool, `SELECT action || ' ' || target || ' ' || outcome || ' ' || actor || ' ' || via || ' ' || reason
		|| ' ' || (before IS NOT NULL)::text || ' ' || (after IS NOT NULL)::text FROM coordctl_audit ORDER BY id`)
}

// TestMutationsAreConfirmedAuditedAndCompareAndSet: nothing changes without
// --confirm or a "yes" on a terminal; --dry-run changes nothing and writes no
// audit row; a change on a state that moved since it was shown is refused (exit
// 3) and recorded as a conflict; every applied change has its audit row.
func TestMutationsAreConfirmedAuditedAndCompareAndSet(t *testing.T) {
	e := testenv.Seeded(t)
	r := newRunner(t, e)
	_, v0 := sagaRow(t, e, testenv.StuckSaga)
	retry := []string{"saga", "retry", testenv.StuckSaga, "--reason", "provider is back"}

	if _, errs, code := r.run("saga", "retry", testenv.StuckSaga); code != cli.ExitUsage || !strings.Contains(errs, "--reason is required") {
		t.Fatalf("retry without --reason: exit %d %s", code, errs)
	}
	if _, errs, code := r.run(retry...); code != cli.ExitRefused || !strings.Contains(errs, "without --confirm") {
		t.Fatalf("retry without --confirm on a pipe: exit %d %s", code, errs)
	}
	r.tty, r.in = true, "no\n"
	if _, errs, code := r.run(retry...); code != cli.ExitRefused || !strings.Contains(errs, "Type yes") {
		t.Fatalf("retry answered no: exit %d %s", code, errs)
	}
	r.tty, r.in = false, ""
	out, errs, code := r.run(append(retry, "--dry-run")...)
	if code != cli.ExitOK || !strings.Contains(out, "dry run: nothing changed") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errs)
	}
	if _, v := sagaRow(t, e, testenv.StuckSaga); v != v0 || len(auditRows(t, e)) != 0 {
		t.Fatalf("refused, unconfirmed and dry-run retries changed something: updated %s → %s, audit %v", v0, v, auditRows(t, e))
	}

	var sg admin.Saga
	r.decode(&sg, "saga", "get", testenv.StuckSaga)
	r.tty, r.in = true, "yes\n"
	if out, errs, code := r.run(retry...); code != cli.ExitOK || !strings.Contains(out, "applied") {
		t.Fatalf("retry answered yes: exit %d\n%s%s", code, out, errs)
	}
	r.tty, r.in = false, ""
	if _, v := sagaRow(t, e, testenv.StuckSaga); v == v0 {
		t.Fatal("the confirmed retry changed nothing")
	}
	// The version read before that retry is stale now.
	if _, errs, code := r.run(append(retry, "--confirm", "--expect", sg.Version)...); code != cli.ExitConflict || !strings.Contains(errs, "changed since it was shown") {
		t.Fatalf("retry with a stale --expect: exit %d %s", code, errs)
	}

	// Requeue, then again: the event is no longer parked.
	id := e.ParkedID.String()
	var ch admin.Change
	r.decode(&ch, "outbox", "parked", "requeue", id, "--reason", "limit raised", "--confirm")
	if ch.AuditID == 0 || ch.Action != "outbox.requeue" {
		t.Fatalf("requeue = %+v", ch)
	}
	if _, errs, code := r.run("outbox", "parked", "requeue", id, "--reason", "again", "--confirm"); code != cli.ExitError || !strings.Contains(errs, "not found") {
		t.Fatalf("second requeue: exit %d %s", code, errs)
	}
	var pending bool
	if err := e.DB.Pool.QueryRow(testenv.Ctx(t), `SELECT EXISTS (SELECT 1 FROM coord_outbox WHERE id = $1 AND published_at IS NULL)`, id).Scan(&pending); err != nil || !pending {
		t.Fatalf("requeued event pending in the outbox: %v %v", pending, err)
	}

	// Resolve the needs_human saga, cancel the stuck one (before its pivot).
	r.decode(&ch, "saga", "resolve", testenv.HumanSaga, "--how", "compensated", "--reason", "refunded by hand, INC-312", "--confirm")
	if s, _ := sagaRow(t, e, testenv.HumanSaga); s != "compensated" {
		t.Fatalf("after resolve --how compensated: %s", s)
	}
	if _, errs, code := r.run("saga", "resolve", testenv.HumanSaga, "--how", "bogus", "--reason", "x", "--confirm"); code != cli.ExitUsage {
		t.Fatalf("resolve --how bogus: exit %d %s", code, errs)
	}
	r.decode(&ch, "saga", "cancel", testenv.StuckSaga, "--reason", "customer cancelled", "--confirm")
	if s, _ := sagaRow(t, e, testenv.StuckSaga); s != "compensating" && s != "compensated" {
		t.Fatalf("after cancel: %s", s)
	}

	// Reset the fence: pgfence's audit table and coordctl's both record it.
	lease := e.Holder.Token().Lease()
	if _, errs, code := r.run("fences", "reset", lease, "--to", "0", "--expect", "999", "--reason", "stale view", "--confirm"); code != cli.ExitConflict {
		t.Fatalf("fences reset with a stale --expect: exit %d %s", code, errs)
	}
	r.decode(&ch, "fences", "reset", lease, "--to", "0", "--reason", "etcd restored from backup", "--confirm")
	var f admin.Fence
	r.decode(&f, "fences", "get", lease)
	if f.Highest != 0 || len(f.Resets) != 1 || f.Resets[0].Actor != "alice@oncall" || f.Resets[0].Before != e.Holder.Token().Revision() {
		t.Fatalf("after fences reset: %+v", f)
	}
	if _, errs, code := r.run("fences", "reset", lease, "--to", "0", "--reason", "again", "--confirm"); code == cli.ExitOK {
		t.Fatalf("a reset to what the row holds succeeded: %s", errs)
	}

	// A reason the audit table would not keep as given is refused before anything.
	if _, errs, code := r.run("saga", "retry", testenv.HumanSaga, "--reason", "bad\x00reason", "--confirm"); code == cli.ExitOK || !strings.Contains(errs, "control character") {
		t.Fatalf("NUL in the reason: exit %d %s", code, errs)
	}

	want := []string{
		"saga.retry " + testenv.StuckSaga + " applied alice@oncall cli provider is back true true",
		"saga.retry " + testenv.StuckSaga + " conflict alice@oncall cli provider is back true true",
		"outbox.requeue " + id + " applied alice@oncall cli limit raised true true",
		"saga.resolve.compensated " + testenv.HumanSaga + " applied alice@oncall cli refunded by hand, INC-312 true true",
		"saga.cancel " + testenv.StuckSaga + " applied alice@oncall cli customer cancelled true true",
		"fence.reset " + lease + " conflict alice@oncall cli stale view true true",
		"fence.reset " + lease + " applied alice@oncall cli etcd restored from backup true true",
	}
	for i := range want { // via: "cli" and the account that ran it, beside the declared actor
		want[i] = strings.Replace(want[i], " alice@oncall cli ", " alice@oncall "+osVia(t)+" ", 1)
	}
	if got := auditRows(t, e); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var es []admin.AuditEntry
	r.decode(&es, "audit", "list", "--target", testenv.StuckSaga)
	if len(es) != 3 || es[0].Action != "saga.cancel" {
		t.Fatalf("audit list --target = %+v", es)
	}
}

// TestMigrateAndNotMigrated: a mutation refuses to run without coordctl's audit
// table; `coordctl migrate` creates it (recorded in coordkit_migrations) and
// --sql prints it.
func TestMigrateAndNotMigrated(t *testing.T) {
	db := coordtest.Postgres(t)
	r := &runner{t: t, env: map[string]string{"DATABASE_URL": db.URL, "COORDCTL_ACTOR": "alice"}}
	if _, errs, code := r.run("saga", "retry", "x", "--reason", "r", "--confirm"); code != cli.ExitError {
		t.Fatalf("retry on an empty schema: exit %d %s", code, errs)
	}
	out, _, code := r.run("migrate", "--sql")
	if code != cli.ExitOK || !strings.Contains(out, `CREATE TABLE "coordctl_audit"`) || !strings.Contains(out, "coordkit_migrations") {
		t.Fatalf("migrate --sql: exit %d\n%s", code, out)
	}
	if _, errs, code := r.run("migrate"); code != cli.ExitOK {
		t.Fatalf("migrate: exit %d %s", code, errs)
	}
	var v int
	if err := db.Pool.QueryRow(testenv.Ctx(t), `SELECT max(version) FROM coordkit_migrations WHERE component = 'coordctl_audit'`).Scan(&v); err != nil || v != 2 {
		t.Fatalf("coordkit_migrations records coordctl_audit at %d, %v", v, err)
	}
	if _, errs, code := r.run("migrate"); code != cli.ExitOK {
		t.Fatalf("migrate again: exit %d %s", code, errs)
	}
	// Without any PostgreSQL setting, coordctl does not guess one.
	r.env = map[string]string{}
	if _, errs, code := r.run("saga", "list"); code != cli.ExitError || !strings.Contains(errs, "no PostgreSQL configured") {
		t.Fatalf("saga list with no database: exit %d %s", code, errs)
	}
}

// osVia is the via a CLI change records: "cli" and the account running the test.
func osVia(t *testing.T) string {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	return "cli " + u.Username + "@" + host
}
