// Command coorddemo tells the stories of RFC-COORD-001 as they happen, with real
// processes and real servers: an embedded etcd it starts itself and the local
// PostgreSQL (scripts/services.sh starts it). Each part prints what happened and a
// one-line verdict with counts; the exit code is 0 only if every verdict holds.
//
//	go run ./cmd/coorddemo              # every part
//	go run ./cmd/coorddemo -part gcpause,payment
//
// The parts: gcpause (the GC-pause double charge, prevented by fencing), payment (a
// retried payment charged once), order (an event published iff its order
// committed), saga (compensation before the pivot, forward retry after it),
// ownership (a paused partition owner's partitions move, its late writes are
// rejected, and nobody else stopped), schedule (the monthly billing run: its
// scheduler frozen mid-run, the next one finishes it, every customer charged
// once), config (config served while etcd is stopped), vet (coordvet catching a
// dual write).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// part is one story. It returns the verdict line and whether it holds.
type part struct {
	name  string
	title string
	run   func(ctx context.Context, e *env) (verdict string, ok bool)
}

var parts = []part{
	{"gcpause", "The GC-pause double charge", runGCPause},
	{"payment", "A retried payment", runPayment},
	{"order", "An order and its event", runOrder},
	{"saga", "A saga that fails on its third step", runSaga},
	// ownership and schedule before config: config stops the embedded etcd.
	{"ownership", "A paused partition owner", runOwnership},
	{"schedule", "The monthly billing run", runMonthly},
	{"config", "Config while etcd is down", runConfig},
	{"vet", "coordvet catches a dual write", runVet},
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-child" {
		os.Exit(runChild(os.Args[2:]))
	}
	var names []string
	for _, p := range parts {
		names = append(names, p.name)
	}
	which := flag.String("part", "all", "comma-separated parts to run: "+strings.Join(names, ", "))
	pgURL := flag.String("postgres", envOr("COORD_DEMO_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "PostgreSQL URL")
	flag.Parse()

	selected := map[string]bool{}
	for _, n := range strings.Split(*which, ",") {
		selected[strings.TrimSpace(n)] = true
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	e, err := newEnv(ctx, *pgURL)
	if err != nil {
		fmt.Fprintf(os.Stderr, "coorddemo: %v\n", err)
		os.Exit(2)
	}
	defer e.close()
	fmt.Printf("coordkit demo — embedded etcd at %s, PostgreSQL schema %s\n", e.etcdEndpoint(), e.schema)

	failed, ran := 0, 0
	for i, p := range parts {
		if !selected["all"] && !selected[p.name] {
			continue
		}
		ran++
		fmt.Printf("\n[%d/%d] %s\n", i+1, len(parts), p.title)
		verdict, ok := p.run(ctx, e)
		mark := "✔"
		if !ok {
			mark, failed = "✘", failed+1
		}
		fmt.Printf("  %s verdict: %s\n", mark, verdict)
	}
	if ran == 0 {
		fmt.Fprintf(os.Stderr, "coorddemo: no part named %q (have %s)\n", *which, strings.Join(names, ", "))
		os.Exit(2)
	}
	fmt.Printf("\n%d of %d verdicts hold\n", ran-failed, ran)
	if failed > 0 {
		os.Exit(1)
	}
}

// step prints one line of a story.
func step(format string, args ...any) { fmt.Printf("  · "+format+"\n", args...) }

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
