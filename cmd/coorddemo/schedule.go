package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/schedule"
)

const (
	runCustomers = 30
	runBatch     = 5 // customers per batch: one fenced transaction each
	runFreezeAt  = 3 // A freezes inside its 3rd batch
	runTTL       = 3 * time.Second
)

// runStory is when, in the story, the schedulers start: two seconds before the
// monthly run of 1 December 2026, 09:00 in Berlin.
var runStory = time.Date(2026, 12, 1, 8, 59, 58, 0, mustZone("Europe/Berlin"))

const runSchema = `
CREATE TABLE billing_customers (id int PRIMARY KEY);
INSERT INTO billing_customers SELECT generate_series(1, %d);
-- No unique constraint on purpose: the run's record and the fence stand between a frozen scheduler and a double charge.
CREATE TABLE billing_charges (customer int NOT NULL, run text NOT NULL, scheduler text NOT NULL, token text NOT NULL);`

// runMonthly: the monthly billing run, declared with package schedule in two
// scheduler processes. A runs it batch by batch and freezes (SIGSTOP) inside
// its 3rd batch, past its TTL; B takes the job's partition over and runs the
// remaining batches from the last committed one; A wakes and its charges are
// rejected. Charges = customers; fire records = scheduled runs.
func runMonthly(ctx context.Context, e *env) (string, bool) {
	if failed := e.setUp(ctx, fmt.Sprintf(runSchema, runCustomers), pgfence.Config{}); failed != "" {
		return failed, false
	}
	admin, err := schedule.NewAdmin(e.pool, schedule.Config{Tenant: "demo", Partitions: 1})
	if err != nil {
		return err.Error(), false
	}
	if err := admin.Migrate(ctx, e.pool); err != nil {
		return "migrate: " + err.Error(), false
	}
	startAt := time.Now().Add(time.Second)
	step("two schedulers, A and B, declare the job \"monthly-billing\" (0 9 1 * *, Europe/Berlin; TTL %v)", runTTL)
	step("the story's clock reads %s: the run of 1 December 09:00 is two seconds away", runStory.Format("2006-01-02 15:04:05 MST"))
	events := make(chan event, 256)
	byName := map[string]*child{}
	for _, id := range []string{"A", "B"} {
		c, err := startChild(id, events, "billing", id, e.etcdEndpoint(), e.url, strconv.FormatInt(startAt.UnixNano(), 10))
		if err != nil {
			return err.Error(), false
		}
		defer c.kill()
		byName[id] = c
		if id == "A" { // A joins first and owns the job's partition
			if _, ok := await(events, 20*time.Second, func(ev event) bool { return ev.kind == "READY" }); !ok {
				return "A did not start", false
			}
			time.Sleep(time.Second)
		}
	}
	ev, ok := await(events, 30*time.Second, func(ev event) bool { return ev.kind == "BATCH" && ev.fields[0] == strconv.Itoa(runFreezeAt) })
	if !ok || ev.who != "A" {
		return fmt.Sprintf("A did not reach batch %d (got %+v)", runFreezeAt, ev), false
	}
	step("09:00: A fires the run %s: batches of %d customers, each in one transaction with the fence check and the run's record", ev.fields[3], runBatch)
	if err := byName["A"].freeze(); err != nil {
		return "SIGSTOP: " + err.Error(), false
	}
	frozeAt := time.Now()
	step("A froze (SIGSTOP, a long GC pause) inside batch %s (customers %s–%s), with its transaction open", ev.fields[0], ev.fields[1], ev.fields[2])
	took, ok := await(events, 30*time.Second, func(ev event) bool { return ev.who == "B" && ev.kind == "BATCH" })
	if !ok {
		return "B never took the run over", false
	}
	step("B took the job's partition over %.1fs later and resumes the run at batch %s (customers %s–%s), token %s",
		time.Since(frozeAt).Seconds(), took.fields[0], took.fields[1], took.fields[2], took.fields[4])
	if _, ok := await(events, 30*time.Second, func(ev event) bool { return ev.who == "B" && ev.kind == "FINISHED" }); !ok {
		return "B did not finish the run", false
	}
	step("B ran the remaining batches; the run's record says ok")
	if err := byName["A"].resume(); err != nil {
		return "SIGCONT: " + err.Error(), false
	}
	rejected := 0
	if rej, ok := await(events, 20*time.Second, func(ev event) bool { return ev.who == "A" && ev.kind == "REJECTED" }); ok {
		rejected++
		step("A wakes (SIGCONT) and sends its batch's charges: rejected — %s", strings.Join(rej.fields, " "))
	}
	time.Sleep(500 * time.Millisecond)
	var customers, twice, charges, runs, byA int
	err = e.pool.QueryRow(ctx, `SELECT (SELECT count(DISTINCT customer) FROM billing_charges),
		(SELECT count(*) FROM (SELECT customer FROM billing_charges GROUP BY 1 HAVING count(*) > 1) d),
		(SELECT count(*) FROM billing_charges),
		(SELECT count(*) FROM coord_schedule_fires WHERE tenant = 'demo' AND job = 'monthly-billing' AND outcome = 'ok'),
		(SELECT count(*) FROM billing_charges WHERE scheduler = 'A')`).Scan(&customers, &twice, &charges, &runs, &byA)
	if err != nil {
		return "count: " + err.Error(), false
	}
	verdict := fmt.Sprintf("charges %d = customers %d (%d charged twice; %d by A before it froze); fire records %d = scheduled runs 1; A's late charges rejected: %d",
		charges, runCustomers, twice, byA, runs, rejected)
	return verdict, charges == runCustomers && customers == runCustomers && twice == 0 && runs == 1 && rejected == 1
}

// runBillingScheduler is one scheduler process: `-child billing <id> <etcd>
// <pg> <unix ns at which the story's clock reads runStory>`.
func runBillingScheduler(args []string) int {
	ctx := context.Background()
	if len(args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: -child billing <name> <etcd endpoint> <postgres url> <start unix ns>")
		return 2
	}
	startNS, err := strconv.ParseInt(args[3], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	id, cli, pool, code := childConnect(ctx, "billing", args[:3])
	if code != 0 {
		return code
	}
	defer cli.Close()
	defer pool.Close()
	clock := offsetClock{offset: runStory.Sub(time.Unix(0, startNS))}
	s, err := schedule.New(cli, pool, schedule.Config{Tenant: "demo", Partitions: 1, Clock: clock, Logger: quiet, PollInterval: 500 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = s.Add(schedule.Job{Name: "monthly-billing", Cron: "0 9 1 * *", Zone: "Europe/Berlin", MaxAttempts: 1,
		Handler: func(ctx context.Context, tx pgx.Tx, f *schedule.Fire) error {
			after := 0
			if f.Cursor != nil {
				after, _ = strconv.Atoi(string(f.Cursor))
			}
			first, last := after+1, min(after+runBatch, runCustomers)
			emit("BATCH", f.Batch+1, first, last, f.ID.Local.Format("2006-01-02T15:04"), f.Token.Revision())
			time.Sleep(400 * time.Millisecond) // the payment provider's calls: where the pause lands
			for c := first; c <= last; c++ {
				// Like the billing code in the story, a charge is not re-checked
				// against the partition's context: what the database does with
				// a frozen scheduler's writes is the point.
				if _, err := tx.Exec(context.WithoutCancel(ctx), `INSERT INTO billing_charges (customer, run, scheduler, token) VALUES ($1, $2, $3, $4)`,
					c, f.Key(), id, f.Token.String()); err != nil {
					emit("REJECTED", "PostgreSQL had ended its transaction (pgfence's idle timeout, TTL/3):", firstLine(err))
					return err
				}
			}
			if last < runCustomers {
				f.Continue([]byte(strconv.Itoa(last)))
			} else {
				emit("FINISHED")
			}
			return nil
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sess, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: "demo", TTL: runTTL, Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	emit("READY")
	err = s.Run(ctx, sess)
	fmt.Fprintf(os.Stderr, "billing scheduler %s: %v\n", id, err)
	return 0
}

// offsetClock is the system clock moved to the story's time.
type offsetClock struct{ offset time.Duration }

func (c offsetClock) Now() time.Time                       { return time.Now().Add(c.offset) }
func (c offsetClock) NewTimer(d time.Duration) coord.Timer { return coord.SystemClock().NewTimer(d) }

func mustZone(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	if i := strings.LastIndex(s, ": "); i >= 0 && len(s)-i > 20 {
		s = s[i+2:]
	}
	return s
}
