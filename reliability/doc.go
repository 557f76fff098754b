// Package reliability runs the whole SDK under faults — real etcd clusters in child
// processes, real PostgreSQL and Redis, SIGSTOP/SIGKILL, member restarts, blackholed
// and delayed connections — and checks the recorded histories with porcupine. It is
// its own module so its checker never enters the SDK's dependency graph.
//
// Two tiers: `go test ./...` here runs the bounded tier (part of scripts/test.sh);
// scripts/chaos.sh runs the full tier (COORD_FULL=1: more trials, longer) of these
// scenarios and of every package's own fault tests, and writes docs/reliability.md
// from the results they report through coordtest.Report.
package reliability
