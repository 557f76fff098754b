package correctnesslease

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// pausedChildArg, followed by the etcd endpoints, the tenant, the lease names
// (comma-separated) and the TTL, makes the test binary a paused holder.
const pausedChildArg = "correctnesslease-paused-holder"

// pausedChild holds each lease name on its own session (so that every lease is an
// independent trial), prints "held <name> <token>" for each and "ready", and waits
// for each lease to lose its authority — the parent SIGSTOPs it past the TTL and
// SIGCONTs it — then prints "lost <name> <reason>" for each and "done".
func pausedChild(args []string) int {
	fail := func(err error) int { fmt.Println("fatal", err); return 2 }
	if len(args) != 4 {
		return fail(fmt.Errorf("want endpoints, tenant, names, ttl; got %q", args))
	}
	ttl, err := time.ParseDuration(args[3])
	if err != nil {
		return fail(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(args[0], ","), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fail(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	names := strings.Split(args[2], ",")
	leases := make([]*Lease, len(names))
	for i, n := range names {
		s, err := NewSession(ctx, cli, Config{Tenant: args[1], TTL: ttl, Logger: quiet})
		if err != nil {
			return fail(err)
		}
		defer s.Close(context.WithoutCancel(ctx))
		if leases[i], err = Acquire(ctx, s, n); err != nil {
			return fail(err)
		}
		fmt.Println("held", n, leases[i].Token())
	}
	fmt.Println("ready") // SIGSTOPped from here on
	for i, l := range leases {
		select {
		case <-l.Context().Done():
			fmt.Println("lost", names[i], lossReason(context.Cause(l.Context())))
		case <-ctx.Done():
			return fail(fmt.Errorf("lease %s still held", names[i]))
		}
	}
	fmt.Println("done")
	return 0
}

// TestPausedHolderReportsItsOwnExpiry is the commonest incident: a holder paused
// (GC, SIGSTOP) past its TTL, so etcd expired its session's lease and deleted its
// keys. When it wakes, every lease must say so — LossRenewalDeadline or
// LossSessionExpired — never LossKeyDeleted ("deleted by someone else"), which
// the runbook query and the paging rule do not count. Each round freezes a child
// process holding ten leases, each on its own session, until etcd (listed
// directly) has deleted every key, then resumes it.
func TestPausedHolderReportsItsOwnExpiry(t *testing.T) {
	t.Parallel()
	res := coordtest.NewResult(t, "holder paused past its TTL reports its own expiry, not key_deleted",
		coordtest.Faults("holder SIGSTOPped until etcd expired its leases"))
	defer coordtest.Report(t, res)
	e := coordtest.Etcd(t)
	cli := e.Client(t)
	tenant := coordtest.Tenant(t)
	const ttl, perRound = MinTTL, 10
	rounds := coordtest.Pick(3, 20)
	reasons := map[coord.LossReason]int{}
	var paused []time.Duration
	for r := range rounds {
		names := make([]string, perRound)
		for i := range names {
			names[i] = fmt.Sprintf("r%02d-%02d", r, i)
		}
		p := coordtest.StartProcess(t, fmt.Sprintf("paused holder %d", r), os.Args[0], "-test.run=^$", "--",
			pausedChildArg, strings.Join(e.Endpoints, ","), tenant, strings.Join(names, ","), ttl.String())
		p.WaitOutput(t, "ready", 30*time.Second)
		held := 0
		for _, line := range strings.Split(p.Output(), "\n") {
			if strings.HasPrefix(line, "held ") {
				held++
			}
		}
		if held != perRound {
			t.Fatalf("round %d: child holds %d leases, want %d:\n%s", r, held, perRound, p.Output())
		}
		if err := p.Pause(); err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		coordtest.WaitStopped(t, p.Pid(), 10*time.Second)
		// The fault: etcd expires the frozen holder's sessions and deletes its keys.
		for deadline := time.Now().Add(4 * ttl); len(electionKeys(t, cli, tenant)) > 0; {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: etcd still holds the paused child's keys after %v: %v", r, 4*ttl, electionKeys(t, cli, tenant))
			}
			time.Sleep(20 * time.Millisecond)
		}
		if st, err := coordtest.ProcessState(p.Pid()); err != nil || st != 'T' {
			t.Fatalf("round %d: child state %q (%v) when its keys were gone, want T (stopped)", r, st, err)
		}
		paused = append(paused, time.Since(stopped))
		res.Faults["holder SIGSTOPped until etcd expired its leases"]++
		res.Outcome["leases expired by etcd while paused"] += perRound
		if err := p.Resume(); err != nil {
			t.Fatal(err)
		}
		p.WaitOutput(t, "done", 30*time.Second)
		for _, line := range strings.Split(p.Output(), "\n") {
			f := strings.Fields(line)
			if len(f) == 3 && f[0] == "lost" {
				reason := coord.LossReason(f[2])
				reasons[reason]++
				res.Trials++
				res.Outcome["lost: "+f[2]]++
				if reason != coord.LossRenewalDeadline && reason != coord.LossSessionExpired {
					t.Errorf("round %d: lease %s reported %q after its session expired, want %s or %s",
						r, f[1], reason, coord.LossRenewalDeadline, coord.LossSessionExpired)
				}
			}
		}
	}
	res.Notes = fmt.Sprintf("%d rounds x %d leases (one session each), TTL %v; paused %v..%v per round",
		rounds, perRound, ttl, slicesMin(paused), slicesMax(paused))
	t.Logf("%d trials: reasons %v; paused %v..%v", res.Trials, reasons, slicesMin(paused), slicesMax(paused))
	if res.Trials != rounds*perRound {
		t.Fatalf("%d leases reported a loss, want %d", res.Trials, rounds*perRound)
	}
}

func slicesMin(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = min(m, d)
	}
	return m.Round(time.Millisecond)
}

func slicesMax(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = max(m, d)
	}
	return m.Round(time.Millisecond)
}
