// Command coordctl is the operator's tool for coordkit: a CLI and a web console
// over leases, fences, the outbox, sagas, idempotency keys and config. See
// docs/coordctl.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(code)
}
