package reliability

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/testing/coordtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The member process of the ownership scenarios (see its package doc for the
// lines it prints).
const ownWorkerPkg = "github.com/coordkit/coordkit/reliability/internal/ownworker"

// The faults of the ownership scenarios, by the names they are counted under.
const (
	ownFaultPause     = "member SIGSTOPped past its TTL"
	ownFaultKill      = "member killed (SIGKILL)"
	ownFaultBlackhole = "member's etcd connections blackholed past its TTL"
	ownFaultLeader    = "etcd raft leader restarted"
	ownFaultRolling   = "member left (SIGTERM, Leave) and restarted in a rolling restart"
	ownFaultLate      = "late writes sent with a lost partition's token"
)

// ownRun sizes one run of the scenario.
type ownRun struct {
	members, partitions int
	ttl, every          time.Duration
	etcdMembers         int      // 1: one etcd process; 3: a cluster whose leader can be restarted
	faults              []string // in order
	unfenced            bool     // the workers write without the fence (the scenario must notice)
	poolConns           int      // PostgreSQL connections per worker (the server allows 100 in all)
}

// TestOwnershipPausedOwner: 3 member processes own 30 partitions and write
// fenced rows (partition, seq, token, writer) to PostgreSQL every 50 ms per
// partition. One member is SIGSTOPped past its TTL: its partitions must be owned
// again within TTL + 1 s, its late writes (sent with the lost tokens when it
// resumes) rejected, nobody else's partitions stopped (same token through the
// fault, no gap of a second beyond the interval; the longest gap is reported
// against the target, interval + 100 ms, and against a fault-free window of
// the same run: the machine's own noise is no fault), and when it rejoins the partitions that move back to it
// are handed off (revoke → drain → release → acquire) in ≤ 1 s at p99. Per
// partition the history is linearizable (porcupine, one fenced register per
// partition) and the tokens the resource accepted never decrease.
func TestOwnershipPausedOwner(t *testing.T) {
	res := coordtest.NewResult(t, "ownership: partition owner SIGSTOPped past its TTL, its partitions taken over, its late writes fenced",
		coordtest.Faults(ownFaultPause, ownFaultLate))
	defer coordtest.Report(t, res)
	v := runOwnership(t, ownRun{members: 3, partitions: 30, ttl: 3 * time.Second, every: 50 * time.Millisecond,
		etcdMembers: 1, faults: []string{ownFaultPause}, poolConns: 12})
	v.into(t, res)
	if res.Outcome["late writes rejected"] == 0 {
		t.Error("no late write was rejected: the fence was never exercised")
	}
}

// TestOwnershipUnderFaults is the full-size scenario (COORD_FULL=1 only): 1,000
// partitions over 10 member processes, a 3-member etcd cluster, and every fault
// in turn — SIGSTOP past the TTL, kill -9, the member's etcd connections
// blackholed past the TTL, the etcd raft leader restarted, and a rolling restart
// of every member — with the checks of TestOwnershipPausedOwner after each.
func TestOwnershipUnderFaults(t *testing.T) {
	if !coordtest.Full() {
		t.Skip("full tier only (COORD_FULL=1, scripts/chaos.sh): 10 processes, 1,000 partitions; TestOwnershipPausedOwner is its bounded form")
	}
	res := coordtest.NewResult(t, "ownership: 1,000 partitions over 10 member processes under SIGSTOP, kill -9, blackhole, etcd leader restart, rolling restart",
		coordtest.Faults(ownFaultPause, ownFaultKill, ownFaultBlackhole, ownFaultLeader, ownFaultRolling, ownFaultLate))
	defer coordtest.Report(t, res)
	v := runOwnership(t, ownRun{members: 10, partitions: 1000, ttl: 5 * time.Second, every: time.Second,
		etcdMembers: 3, faults: []string{ownFaultPause, ownFaultKill, ownFaultBlackhole, ownFaultLeader, ownFaultRolling}, poolConns: 6})
	v.into(t, res)
}

// TestOwnershipScenarioCatchesAnUnfencedResource runs the bounded scenario with
// workers that write without the fence: the paused member's late writes are
// then accepted with tokens older than the new owners', and the scenario must
// say so — else its passing on the fenced resource would prove nothing.
func TestOwnershipScenarioCatchesAnUnfencedResource(t *testing.T) {
	v := runOwnership(t, ownRun{members: 3, partitions: 30, ttl: 3 * time.Second, every: 50 * time.Millisecond,
		etcdMembers: 1, faults: []string{ownFaultPause}, unfenced: true, poolConns: 12})
	if v.faults[ownFaultLate] == 0 {
		t.Fatalf("no late write was sent (faults %v): the run cannot tell", v.faults)
	}
	for _, msg := range v.violations {
		t.Logf("violation found, as it must be: %.300s", msg)
	}
	for _, want := range []string{"stale writes accepted", "not linearizable"} {
		found := false
		for _, msg := range v.violations {
			found = found || strings.Contains(msg, want)
		}
		if !found {
			t.Errorf("against an unfenced resource the scenario did not report %q; violations: %q", want, v.violations)
		}
	}
}

// ownVerdict is what a run observed and what it found wrong.
type ownVerdict struct {
	trials     int
	faults     map[string]int
	outcome    map[string]int64
	notes      string
	violations []string
}

func (v *ownVerdict) violate(format string, args ...any) {
	v.violations = append(v.violations, fmt.Sprintf(format, args...))
}

func (v *ownVerdict) into(t *testing.T, res *coordtest.Result) {
	res.Trials, res.Faults, res.Outcome, res.Notes = v.trials, v.faults, v.outcome, v.notes
	for _, msg := range v.violations {
		t.Error(msg)
	}
}

// ownMember is one worker process and its own proxies to every etcd member.
type ownMember struct {
	name    string
	proc    *coordtest.Process
	proxies []*coordtest.Proxy
	down    bool // paused or killed: not expected in the map
}

// faultWindow is one fault, from its injection to the map settling again.
type faultWindow struct {
	kind        string
	at, settled int64 // unix ns
	unplanned   bool
	lost        map[int]int64 // partition -> token the faulty member held at the fault (unplanned faults)
	before      map[int]int64 // partition -> token at the fault
	after       map[int]int64 // partition -> token once settled
}

// runOwnership runs one scenario and returns what it saw. Infrastructure
// failures (servers that do not start) fail t; what the scenario checks is
// returned as violations.
func runOwnership(t *testing.T, run ownRun) *ownVerdict {
	v := &ownVerdict{faults: map[string]int{}, outcome: map[string]int64{}}
	bin := coordtest.Build(t, ownWorkerPkg)
	// etcd runs as its own process even when it is one member: in the test
	// process it would share the race detector's overhead and stall every
	// member's keepalives together on a loaded machine (a fault nobody injected).
	cluster := coordtest.EtcdCluster(t, run.etcdMembers, nil)
	eps := cluster.Endpoints()
	admin := coordtest.NewEtcdClient(t, eps...)
	db := coordtest.Postgres(t)
	ctx := context.Background()
	fence, err := pgfence.New(pgfence.Config{LeaseTTL: run.ttl, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := fence.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE parts (partition int PRIMARY KEY, value bigint NOT NULL);
		INSERT INTO parts SELECT generate_series(0, %d), 0;
		CREATE TABLE writes (id text PRIMARY KEY, partition int NOT NULL, seq bigint NOT NULL, token bigint NOT NULL, writer text NOT NULL)`,
		run.partitions-1)); err != nil {
		t.Fatal(err)
	}
	// Commits need not wait for the disk: the fence's checks are the same, and
	// the machine's one disk is shared by every writer.
	workerURL := db.URL + "&synchronous_commit=off&pool_max_conns=" + strconv.Itoa(run.poolConns)
	const tenant, group = "rel", "orders"

	ms := make([]*ownMember, run.members)
	for i := range ms {
		m := &ownMember{name: fmt.Sprintf("w%d", i)}
		var weps []string
		for _, ep := range eps {
			p := coordtest.NewProxy(t, strings.TrimPrefix(ep, "http://"))
			m.proxies = append(m.proxies, p)
			weps = append(weps, p.URL())
		}
		args := []string{"-etcd", strings.Join(weps, ","), "-pg", workerURL, "-tenant", tenant, "-group", group,
			"-partitions", strconv.Itoa(run.partitions), "-ttl", run.ttl.String(), "-every", run.every.String(), "-name", m.name}
		if run.unfenced {
			args = append(args, "-unfenced")
		}
		m.proc = coordtest.StartProcess(t, "ownership member "+m.name, bin, args...)
		ms[i] = m
	}
	settle := func(what string) (map[int]int64, int64) {
		owners, at, err := ownSettle(admin, tenant, group, run.partitions, ms, 60*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return owners, at
	}
	current, _ := settle("initial assignment")
	time.Sleep(run.every) // every writer started
	baseline := ownBaseline{from: time.Now().UnixNano(), owners: current}
	time.Sleep(time.Second) // steady state: the fault-free window
	baseline.to = time.Now().UnixNano()

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	var windows []*faultWindow
	pick := func() int { return rng.IntN(len(ms)) }
	for _, kind := range run.faults {
		switch kind {
		case ownFaultPause, ownFaultKill, ownFaultBlackhole:
			i := pick()
			m := ms[i]
			w := &faultWindow{kind: kind, unplanned: true, before: current, lost: ownedBy(t, admin, tenant, group, m.name)}
			switch kind {
			case ownFaultPause:
				before := m.proc.Stats().Pauses
				if err := m.proc.Pause(); err != nil {
					t.Fatal(err)
				}
				coordtest.WaitStopped(t, m.proc.Pid(), 5*time.Second)
				w.at = time.Now().UnixNano()
				v.faults[kind] += m.proc.Stats().Pauses - before
				m.down = true
				time.Sleep(run.ttl + 1500*time.Millisecond)
				ownSettleDown(t, admin, tenant, group, run.partitions, ms, "partitions of the paused member taken over")
				m.down = false
				if err := m.proc.Resume(); err != nil {
					t.Fatal(err)
				}
			case ownFaultKill:
				before := m.proc.Stats().Kills
				m.proc.Kill()
				w.at = time.Now().UnixNano()
				v.faults[kind] += m.proc.Stats().Kills - before
				m.down = true
				ownSettleDown(t, admin, tenant, group, run.partitions, ms, "partitions of the killed member taken over")
				m.down = false
				if err := m.proc.Start(); err != nil {
					t.Fatal(err)
				}
			case ownFaultBlackhole:
				var dropped int64
				for _, p := range m.proxies {
					dropped -= p.Stats().DroppedBytes
					p.Blackhole()
				}
				w.at = time.Now().UnixNano()
				m.down = true
				time.Sleep(run.ttl + 1500*time.Millisecond)
				ownSettleDown(t, admin, tenant, group, run.partitions, ms, "partitions of the blackholed member taken over")
				m.down = false
				for _, p := range m.proxies {
					p.Heal()
					p.Cut()
					dropped += p.Stats().DroppedBytes
				}
				if dropped > 0 {
					v.faults[kind]++
				}
			}
			current, w.settled = settle("after " + kind)
			w.after = current
			windows = append(windows, w)
		case ownFaultLeader:
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			l := cluster.Leader(lctx, admin)
			cancel()
			if l < 0 {
				t.Fatal("no etcd member says it is the leader")
			}
			w := &faultWindow{kind: kind, before: current, at: time.Now().UnixNano()}
			before := cluster.Members[l].Stats().Kills
			cluster.RestartMember(t, l)
			v.faults[kind] += cluster.Members[l].Stats().Kills - before
			current, w.settled = settle("after the leader restart")
			w.after = current
			windows = append(windows, w)
		case ownFaultRolling:
			for _, m := range ms {
				w := &faultWindow{kind: kind, before: current, at: time.Now().UnixNano()}
				lefts := strings.Count(m.proc.Output(), "\nLEFT ")
				m.proc.Terminate(30 * time.Second)
				if strings.Count(m.proc.Output(), "\nLEFT ") > lefts {
					v.faults[kind]++
				}
				if err := m.proc.Start(); err != nil {
					t.Fatal(err)
				}
				current, w.settled = settle("after restarting " + m.name)
				w.after = current
				windows = append(windows, w)
			}
		}
	}
	time.Sleep(time.Second)
	for _, m := range ms {
		m.proc.Kill()
	}
	ownCheck(t, v, run, db, ms, baseline, windows)
	return v
}

// ownedBy returns partition -> token of what worker name's member owns now (at
// least one partition).
func ownedBy(t *testing.T, cli *clientv3.Client, tenant, group, name string) map[int]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := ownership.GroupGet(ctx, cli, tenant, group)
	if err != nil {
		t.Fatalf("ownership.Snapshot: %v", err)
	}
	ids := membersOf(m, map[string]bool{name: true})
	out := map[int]int64{}
	for _, a := range m.Owners {
		if _, ok := ids[a.Owner]; ok {
			out[a.Partition] = a.Revision
		}
	}
	if len(out) == 0 {
		t.Fatalf("worker %s owns nothing before its fault: the fault would prove nothing", name)
	}
	return out
}

// ownSettle waits until the map is complete and still: every partition owned by
// the latest member of a worker that is up, every such member in the map with at
// least one partition, and the same owners in three reads 150 ms apart. It
// returns partition -> token and when it first saw the settled map.
func ownSettle(cli *clientv3.Client, tenant, group string, partitions int, ms []*ownMember, timeout time.Duration) (map[int]int64, int64, error) {
	deadline := time.Now().Add(timeout)
	var last map[int]int64
	var since int64
	stable := 0
	why := "no read yet"
	for time.Now().Before(deadline) {
		time.Sleep(150 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := ownership.GroupGet(ctx, cli, tenant, group)
		cancel()
		if err != nil {
			why, stable = err.Error(), 0
			continue
		}
		up := map[string]bool{}
		for _, w := range ms {
			if !w.down {
				up[w.name] = true
			}
		}
		live := map[string]int{}
		for id, name := range membersOf(m, up) {
			live[id] = 0
			delete(up, name)
		}
		owners := map[int]int64{}
		bad := ""
		for name := range up {
			bad = fmt.Sprintf("worker %s has no member in the group", name)
		}
		for _, a := range m.Owners {
			if bad != "" {
				break
			}
			if _, ok := live[a.Owner]; !ok {
				bad = fmt.Sprintf("partition %d owned by %q, not a live member", a.Partition, a.Owner)
				break
			}
			if a.Owner != a.Target {
				bad = fmt.Sprintf("partition %d owned by %q, assigned to %q", a.Partition, a.Owner, a.Target)
				break
			}
			live[a.Owner]++
			owners[a.Partition] = a.Revision
		}
		if bad == "" && len(owners) != partitions {
			bad = fmt.Sprintf("%d of %d partitions owned", len(owners), partitions)
		}
		if bad == "" {
			for id, n := range live {
				if n == 0 {
					bad = fmt.Sprintf("live member %q owns nothing", id)
					break
				}
			}
		}
		if bad != "" {
			why, stable = bad, 0
			continue
		}
		if stable > 0 && mapsEqual(owners, last) {
			stable++
		} else {
			stable, last, since = 1, owners, time.Now().UnixNano()
		}
		if stable == 3 {
			return last, since, nil
		}
	}
	return nil, 0, fmt.Errorf("ownership map not settled within %v: %s", timeout, why)
}

// membersOf returns member id -> worker name for the members of the workers
// named (the workers Join with metadata writer=<name>).
func membersOf(m ownership.Map, names map[string]bool) map[string]string {
	out := map[string]string{}
	for _, mi := range m.Members {
		if w := mi.Metadata["writer"]; names[w] {
			out[mi.ID] = w
		}
	}
	return out
}

// ownSettleDown waits, while a member is down, until the others own everything.
func ownSettleDown(t *testing.T, cli *clientv3.Client, tenant, group string, partitions int, ms []*ownMember, what string) {
	t.Helper()
	if _, _, err := ownSettle(cli, tenant, group, partitions, ms, 60*time.Second); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func mapsEqual(a, b map[int]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		if y, ok := b[k]; !ok || x != y {
			return false
		}
	}
	return true
}

// ownOp is one write as the workers reported it.
type ownOp struct {
	id        string
	partition int
	token     int64
	late      bool
	call, ret int64 // unix ns; ret 0: no answer (resolved through the database)
	outcome   string
	seq       int64
	client    int
}

// ownEvent is an ACQ, REV or END line.
type ownEvent struct {
	kind      string
	partition int
	token     int64
	at        int64
	detail    string
	worker    int
}

// parseOwnOutput reads every worker's lines.
func parseOwnOutput(ms []*ownMember) (ops map[string]*ownOp, events []ownEvent) {
	ops = map[string]*ownOp{}
	for wi, m := range ms {
		for _, line := range strings.Split(m.proc.Output(), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			num := func(i int) int64 {
				if i >= len(f) {
					return 0
				}
				n, _ := strconv.ParseInt(f[i], 10, 64)
				return n
			}
			switch f[0] {
			case "C":
				if len(f) == 6 {
					ops[f[1]] = &ownOp{id: f[1], partition: int(num(2)), token: num(3), call: num(4), late: f[5] == "1", client: wi}
				}
			case "R":
				op := ops[f[1]]
				if op == nil || len(f) < 4 {
					continue
				}
				op.outcome = f[2]
				if op.outcome == "ok" {
					op.seq, op.ret = num(3), num(4)
				} else {
					op.ret = num(3)
				}
			case "ACQ", "REV", "END":
				if len(f) >= 4 {
					ev := ownEvent{kind: f[0], partition: int(num(1)), token: num(2), at: num(3), worker: wi}
					if len(f) >= 5 {
						ev.detail = f[4]
					}
					events = append(events, ev)
				}
			}
		}
	}
	sort.Slice(events, func(i, j int) bool { return events[i].at < events[j].at })
	return ops, events
}

// ownCheck builds the history, resolves unanswered writes through the database
// and checks every claim of the scenario.
func ownCheck(t *testing.T, v *ownVerdict, run ownRun, db *coordtest.PostgresDB, ms []*ownMember, baseline ownBaseline, windows []*faultWindow) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ops, events := parseOwnOutput(ms)

	// Unanswered (killed, ambiguous) writes: applied iff their row exists.
	var open []string
	for id, op := range ops {
		if op.outcome == "" || op.outcome == "amb" {
			open = append(open, id)
		}
	}
	applied := map[string]int64{}
	rows, err := db.Pool.Query(ctx, `SELECT id, seq FROM writes WHERE id = ANY($1)`, open)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			t.Fatal(err)
		}
		applied[id] = seq
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	var history []porcupine.Operation
	var lateSent, lateRejected, lateAccepted, accepted, rejected, busy int64
	acceptedBy := map[int]int64{}
	for _, op := range ops {
		in := PartitionInput{Partition: op.partition, RegisterInput: RegisterInput{Kind: OpIncr, Token: op.token, ID: op.id, Zombie: op.late}}
		var out RegisterOutput
		ret := op.ret
		switch op.outcome {
		case "ok":
			out = RegisterOutput{Accepted: true, Value: op.seq}
		case "stale":
		case "busy":
			busy++
			continue // rolled back: no effect
		default:
			seq, ok := applied[op.id]
			if !ok {
				continue // never applied: no effect
			}
			out, ret = RegisterOutput{Accepted: true, Value: seq}, 1<<62 // took effect some time after its call
			v.outcome["unanswered writes resolved as applied"]++
		}
		if op.late {
			lateSent++
			if out.Accepted {
				lateAccepted++
			} else {
				lateRejected++
			}
		}
		if out.Accepted {
			accepted++
			acceptedBy[op.partition]++
		} else {
			rejected++
		}
		history = append(history, porcupine.Operation{ClientId: op.client, Input: in, Output: out, Call: op.call, Return: ret})
	}
	v.trials = len(history)
	v.faults[ownFaultLate] = int(lateSent)
	v.outcome["writes accepted"] = accepted
	v.outcome["stale writes rejected"] = rejected
	v.outcome["late writes rejected"] = lateRejected
	v.outcome["late writes accepted before any newer token"] = lateAccepted
	v.outcome["writes busy (rolled back, retried)"] = busy

	// The resource's own record: per partition, seq 1..n with tokens that never decrease.
	var staleAccepted, gaps int64
	rows, err = db.Pool.Query(ctx, `SELECT partition, seq, token FROM writes ORDER BY partition, seq`)
	if err != nil {
		t.Fatal(err)
	}
	lastPart, lastSeq, highest := -1, int64(0), int64(0)
	rowsBy := map[int]int64{}
	for rows.Next() {
		var p int
		var seq, tok int64
		if err := rows.Scan(&p, &seq, &tok); err != nil {
			t.Fatal(err)
		}
		if p != lastPart {
			lastPart, lastSeq, highest = p, 0, 0
		}
		if seq != lastSeq+1 {
			gaps++
		}
		if tok < highest {
			staleAccepted++
		}
		lastSeq, highest = seq, max(highest, tok)
		rowsBy[p]++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	v.outcome["stale writes accepted"] = staleAccepted
	v.outcome["partitions"] = int64(run.partitions)
	if staleAccepted > 0 {
		v.violate("%d stale writes accepted: rows whose token is older than an earlier row's of the same partition", staleAccepted)
	}
	if gaps > 0 {
		v.violate("%d holes in the partitions' seq columns", gaps)
	}
	for p := range run.partitions {
		if rowsBy[p] != acceptedBy[p] {
			v.violate("partition %d has %d rows but %d writes were acknowledged or resolved as applied", p, rowsBy[p], acceptedBy[p])
		}
	}
	if got := porcupine.CheckOperationsTimeout(PartitionedRegister, history, 60*time.Second); got != porcupine.Ok {
		v.violate("per-partition history of %d writes is not linearizable for a fenced register: %v", len(history), got)
	}

	// Takeover after each unplanned loss: the first Acquired of each lost
	// partition with a newer token, from the fault.
	bound := run.ttl + time.Second
	var worstTakeover time.Duration
	for _, w := range windows {
		if !w.unplanned {
			continue
		}
		for p, tok := range w.lost {
			took := time.Duration(-1)
			for _, ev := range events {
				if ev.kind == "ACQ" && ev.partition == p && ev.token > tok && ev.at > w.at {
					took = time.Duration(ev.at - w.at)
					break
				}
			}
			if took < 0 {
				v.violate("%s: partition %d (token %d) never acquired again", w.kind, p, tok)
				continue
			}
			worstTakeover = max(worstTakeover, took)
			if took > bound {
				v.violate("%s: partition %d owned again after %v, more than TTL + 1 s = %v", w.kind, p, took.Round(time.Millisecond), bound)
			}
		}
	}
	v.outcome["max takeover ms"] = worstTakeover.Milliseconds()

	// Planned handoffs: from the revoke (its event or its context's end, the
	// earlier) to the next owner's Acquired.
	type term struct {
		p   int
		tok int64
	}
	revokedAt := map[term]int64{}
	for _, ev := range events {
		k := term{ev.partition, ev.token}
		if (ev.kind == "REV" || (ev.kind == "END" && ev.detail == "planned")) && revokedAt[k] == 0 {
			revokedAt[k] = ev.at
		}
	}
	lostTerms := map[term]bool{}
	for _, ev := range events {
		if ev.kind == "END" && ev.detail == "lost" {
			lostTerms[term{ev.partition, ev.token}] = true
		}
	}
	// A partition another member acquired with a newer token before this
	// member's revoke was lost (its key went with the session), never handed
	// off: its revoke must say so (END lost). Seen in chaos.sh (06:55): the
	// member resumed from SIGSTOP read the target that had moved its
	// partitions before its session noticed the deadline, and reported a
	// planned rebalance for each — their "handoffs" to the next unrelated
	// Acquired made the p99 10.2 s.
	acquiredBy := map[int][]ownEvent{} // partition -> its Acquired events, in time order
	for _, ev := range events {
		if ev.kind == "ACQ" {
			acquiredBy[ev.partition] = append(acquiredBy[ev.partition], ev)
		}
	}
	misreported := 0
	for k, at := range revokedAt {
		if lostTerms[k] {
			continue
		}
		for _, acq := range acquiredBy[k.p] {
			if acq.at >= at {
				break
			}
			if acq.token > k.tok {
				if misreported++; misreported <= 3 {
					v.violate("partition %d (token %d) reported handed off %v after a newer owner had acquired it: a loss reported as a planned revoke",
						k.p, k.tok, time.Duration(at-acq.at).Round(time.Millisecond))
				}
				break
			}
		}
	}
	v.outcome["losses reported as planned revokes"] = int64(misreported)
	var handoffs []time.Duration
	for k, at := range revokedAt {
		if lostTerms[k] {
			continue // not a handoff: the owner lost it
		}
		for _, ev := range events {
			if ev.kind == "ACQ" && ev.partition == k.p && ev.token > k.tok && ev.at >= at {
				handoffs = append(handoffs, time.Duration(ev.at-at))
				break
			}
		}
	}
	slices.Sort(handoffs)
	pct := func(q int) time.Duration {
		if len(handoffs) == 0 {
			return 0
		}
		return handoffs[min(len(handoffs)-1, len(handoffs)*q/100)]
	}
	v.outcome["planned handoffs"] = int64(len(handoffs))
	v.outcome["handoff p50 ms"] = pct(50).Milliseconds()
	v.outcome["handoff p99 ms"] = pct(99).Milliseconds()
	if len(handoffs) == 0 {
		v.violate("no planned handoff happened: the rejoin moved nothing")
	} else if pct(99) > time.Second {
		v.violate("planned handoff p99 %v > 1 s (%d handoffs, p50 %v)", pct(99), len(handoffs), pct(50))
	}

	// Partitions that did not move in a fault's window never paused: their
	// writer was never stopped (same token before and after), and the longest
	// gap between two of their accepted writes in the window is measured
	// against the target (interval + 100 ms) and against the same figure in a
	// fault-free window before the faults, the machine's own noise. A gap of a
	// second beyond the interval is a stall, not noise: a violation.
	byTerm := map[term][]int64{}
	for _, op := range ops {
		if op.outcome == "ok" {
			k := term{op.partition, op.token}
			byTerm[k] = append(byTerm[k], op.ret)
		}
	}
	for _, r := range byTerm {
		slices.Sort(r)
	}
	gapTarget := run.every + 100*time.Millisecond
	var baseGap time.Duration
	for p, tok := range baseline.owners {
		baseGap = max(baseGap, maxGap(byTerm[term{p, tok}], baseline.from, baseline.to))
	}
	var worstGap time.Duration
	var still, overTarget int64
	for _, w := range windows {
		for p, tok := range w.before {
			if w.after[p] != tok {
				continue
			}
			still++
			g := maxGap(byTerm[term{p, tok}], w.at, w.settled)
			worstGap = max(worstGap, g)
			if g > gapTarget {
				overTarget++
			}
			if g >= run.every+time.Second {
				v.violate("%s: partition %d did not move but its writes stopped for %v (interval %v)", w.kind, p, g.Round(time.Millisecond), run.every)
			}
		}
	}
	v.outcome["non-moving partition windows over the gap target"] = overTarget
	v.outcome["max write gap, fault-free window ms"] = baseGap.Milliseconds()
	v.outcome["non-moving partition windows"] = still
	v.outcome["max write gap of non-moving partitions ms"] = worstGap.Milliseconds()
	v.notes = fmt.Sprintf("%d members, %d partitions, TTL %v, one fenced write per partition every %v; faults in order %v. "+
		"Takeover bound TTL + 1 s = %v (max %v); planned handoff p50 %v p99 %v over %d handoffs; "+
		"partitions that did not move: max write gap %v during the faults (target interval + 100 ms = %v; %d of %d over it) against %v in a fault-free window of the same run (the loaded machine's own noise).",
		run.members, run.partitions, run.ttl, run.every, run.faults, bound, worstTakeover.Round(time.Millisecond),
		pct(50).Round(time.Millisecond), pct(99).Round(time.Millisecond), len(handoffs),
		worstGap.Round(time.Millisecond), gapTarget, overTarget, still, baseGap.Round(time.Millisecond))
}

// ownBaseline is a fault-free window of the run and who owned what in it.
type ownBaseline struct {
	from, to int64
	owners   map[int]int64
}

// maxGap returns the longest time in [from, to] without an accepted write,
// counting from the window's edges (no write at all: the whole window).
func maxGap(stamps []int64, from, to int64) time.Duration {
	prev, gap := from, int64(0)
	for _, x := range stamps {
		if x < from || x > to {
			continue
		}
		gap = max(gap, x-prev)
		prev = x
	}
	return time.Duration(max(gap, to-prev))
}
