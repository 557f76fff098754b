package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
)

const (
	gcCustomers = 30
	gcTTL       = 3 * time.Second // the demo's lease; production default is 15 s
	gcFreezeAt  = 5               // the leader freezes before charging its 5th customer
)

const gcSchema = `
CREATE TABLE customers (id int PRIMARY KEY);
INSERT INTO customers SELECT generate_series(1, %d);
-- No unique constraint on purpose: only the fence stands between a zombie and a double charge.
CREATE TABLE charges (customer int NOT NULL, scheduler text NOT NULL, token text NOT NULL, at timestamptz NOT NULL DEFAULT now());`

// runGCPause: two billing schedulers elected with correctnesslease; the leader is
// frozen (SIGSTOP) after checking its leadership and before its write, past its
// lease; the standby takes over and finishes the run; the old leader resumes and
// its charge arrives with its old token — pgfence rejects it.
func runGCPause(ctx context.Context, e *env) (string, bool) {
	if failed := e.setUp(ctx, fmt.Sprintf(gcSchema, gcCustomers), pgfence.Config{}); failed != "" {
		return failed, false
	}
	step("two billing schedulers, A and B, campaign for lease \"billing\" (TTL %v; production default 15 s)", gcTTL)
	events := make(chan event, 256)
	var kids []*child
	for _, id := range []string{"A", "B"} {
		c, err := startChild(id, events, "scheduler", id, e.etcdEndpoint(), e.url)
		if err != nil {
			return err.Error(), false
		}
		defer c.kill()
		kids = append(kids, c)
		if id == "A" {
			// Let A win the first election, so the story reads in order.
			if _, ok := await(events, 20*time.Second, func(ev event) bool { return ev.kind == "LEADER" }); !ok {
				return "no scheduler became leader", false
			}
		}
	}
	byName := map[string]*child{"A": kids[0], "B": kids[1]}
	leader, standby := "A", "B"
	step("A leads; it charges one customer at a time, each write fenced with its token")

	var frozenCustomer string
	if _, ok := await(events, 30*time.Second, func(ev event) bool {
		if ev.who == leader && ev.kind == "CHECKED" && ev.fields[0] == fmt.Sprint(gcFreezeAt) {
			frozenCustomer = ev.fields[0]
			return true
		}
		return false
	}); !ok {
		return "the leader never reached customer " + fmt.Sprint(gcFreezeAt), false
	}
	if err := byName[leader].freeze(); err != nil {
		return "SIGSTOP: " + err.Error(), false
	}
	frozeAt := time.Now()
	step("%s checked its leadership, then froze (SIGSTOP, as in a long GC pause) before charging customer %s", leader, frozenCustomer)

	// Wait for the standby, printing progress while the lease lapses.
	var took event
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	fmt.Print("  · waiting for A's lease to lapse:")
	for took.kind == "" {
		select {
		case ev := <-events:
			if ev.who == standby && ev.kind == "LEADER" {
				took = ev
			}
		case <-tick.C:
			fmt.Printf(" %.0fs", time.Since(frozeAt).Seconds())
			if time.Since(frozeAt) > 30*time.Second {
				fmt.Println()
				return "the standby never took over", false
			}
		}
	}
	fmt.Println()
	step("%s took over after %.1fs with token %s and charges the rest, customer %s included", standby, time.Since(frozeAt).Seconds(), took.fields[0], frozenCustomer)
	if _, ok := await(events, 60*time.Second, func(ev event) bool { return ev.who == standby && ev.kind == "DONE" }); !ok {
		return "the new leader did not finish", false
	}
	if err := byName[leader].resume(); err != nil {
		return "SIGCONT: " + err.Error(), false
	}
	step("%s resumes (SIGCONT) and sends its charge for customer %s with its old token…", leader, frozenCustomer)
	stale, ok := await(events, 20*time.Second, func(ev event) bool {
		return ev.who == leader && (ev.kind == "STALE" || ev.kind == "CHARGED")
	})
	zombieAttempts, zombieRejected := 0, 0
	if ok {
		zombieAttempts++
		if stale.kind == "STALE" {
			zombieRejected++
			step("…rejected by pgfence: stale fencing token (presented %s, the resource has seen %s)", stale.fields[1], stale.fields[2])
		} else {
			step("…ACCEPTED: customer %s charged by a stale leader", frozenCustomer)
		}
	}

	var customers, twice, charged int
	err := e.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE n > 1), coalesce(sum(n), 0)
		FROM (SELECT c.id, count(ch.customer) AS n FROM customers c LEFT JOIN charges ch ON ch.customer = c.id GROUP BY c.id) x
		WHERE n > 0`).Scan(&customers, &twice, &charged)
	if err != nil {
		return "count: " + err.Error(), false
	}
	verdict := fmt.Sprintf("%d of %d customers charged, %d charged twice; zombie writes attempted %d, rejected by the fence %d",
		customers, gcCustomers, twice, zombieAttempts, zombieRejected)
	return verdict, customers == gcCustomers && twice == 0 && zombieAttempts == 1 && zombieRejected == 1
}

// runScheduler is one billing scheduler process: `-child scheduler <id> <etcd> <pg>`.
func runScheduler(args []string) int {
	ctx := context.Background()
	id, cli, pool, code := childConnect(ctx, "scheduler", args)
	if code != 0 {
		return code
	}
	defer cli.Close()
	defer pool.Close()
	fence, err := pgfence.New(pgfence.Config{Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sess, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: "demo", TTL: gcTTL, Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = correctnesslease.Run(ctx, sess, "billing", func(lctx context.Context, tok coord.Token) error {
		emit("LEADER", tok)
		for {
			var next int
			err := pool.QueryRow(lctx, `SELECT coalesce(min(id), 0) FROM customers c
				WHERE NOT EXISTS (SELECT 1 FROM charges WHERE customer = c.id)`).Scan(&next)
			if err != nil {
				return err
			}
			if next == 0 {
				emit("DONE")
				<-lctx.Done() // stay leader until told otherwise
				return nil
			}
			if lctx.Err() != nil { // the leadership check
				return context.Cause(lctx)
			}
			emit("CHECKED", next)
			time.Sleep(150 * time.Millisecond) // computing the invoice: where the pause lands
			// Like the billing job in the story, the charge is not re-checked against
			// the lease's context: only the fence stands between a zombie and a
			// double charge.
			err = fence.Exec(context.WithoutCancel(lctx), pool, tok, func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(lctx, `INSERT INTO charges (customer, scheduler, token) VALUES ($1, $2, $3)`, next, id, tok.String())
				return err
			})
			var stale *coord.StaleTokenError
			if errors.As(err, &stale) {
				emit("STALE", next, stale.Presented.Revision(), stale.Highest.Revision())
				return err
			}
			if err != nil {
				return err
			}
			emit("CHARGED", next)
		}
	}, nil)
	fmt.Fprintf(os.Stderr, "scheduler %s: %v\n", id, err)
	return 0
}
