// Package cli is coordctl's command line: cobra commands over the admin
// package, with etcdctl's connection flags, psql's DSN, table or JSON output,
// and confirmation before any change.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/view"
)

// Exit codes.
const (
	ExitOK       = 0
	ExitError    = 1
	ExitUsage    = 2
	ExitConflict = 3 // the state changed since it was shown: nothing was done
	ExitRefused  = 4 // a change without --confirm (or a "no" at the prompt)
)

// IO is what a command reads and writes, and its environment.
type IO struct {
	In     io.Reader
	Out    io.Writer
	Err    io.Writer
	Getenv func(string) string
	// IsTerminal reports whether In is an interactive terminal (a prompt is
	// possible). Default: In is a character device.
	IsTerminal func() bool
}

// app is one invocation: its flags, connections and admin.
type app struct {
	io  IO
	g   *globals
	adm *admin.Admin
	log *slog.Logger
}

// Main runs coordctl with args and returns its exit code.
func Main(ctx context.Context, args []string, sio IO) int {
	if sio.Getenv == nil {
		sio.Getenv = os.Getenv
	}
	if sio.IsTerminal == nil {
		sio.IsTerminal = func() bool { return isTerminal(sio.In) }
	}
	a := &app{io: sio, g: &globals{}}
	defer a.close()
	root := a.root()
	root.SetArgs(args)
	root.SetIn(sio.In)
	root.SetOut(sio.Out)
	root.SetErr(sio.Err)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(sio.Err, "Error:", err)
	var ce *admin.ConflictError
	var refused refusedError
	var usage usageError
	switch {
	case errors.As(err, &ce):
		return ExitConflict
	case errors.As(err, &refused):
		return ExitRefused
	case errors.As(err, &usage):
		return ExitUsage
	}
	return ExitError
}

func (a *app) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "coordctl",
		Short: "The operator's tool for coordkit: leases, members, ownership, fences, outbox, sagas, idempotency keys, config",
		Long: `coordctl reads and repairs what coordkit keeps in etcd and PostgreSQL.

It is read-only unless a command that changes something is given --confirm (or a
"yes" at the prompt on a terminal); --dry-run shows what would change. Every change
compares the state you were shown with the state it acts on, refuses if they differ
(exit code 3), and writes an audit row (who, when, what, before/after) in
PostgreSQL. See docs/coordctl.md.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.setup(cmd)
		},
	}
	a.g.register(root.PersistentFlags())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(a.overviewCmd(), a.leasesCmd(), a.membersCmd(), a.ownershipCmd(), a.fencesCmd(), a.outboxCmd(), a.sagaCmd(), a.idemCmd(),
		a.configCmd(), a.auditCmd(), a.migrateCmd(), a.serveCmd())
	return root
}

// setup reads the environment for every flag left unset and builds the admin.
func (a *app) setup(cmd *cobra.Command) error {
	if err := fromEnv(cmd.Root().PersistentFlags(), a.io.Getenv); err != nil {
		return usageError{err}
	}
	if err := fromEnv(cmd.Flags(), a.io.Getenv); err != nil {
		return usageError{err}
	}
	if a.g.output != "table" && a.g.output != "json" {
		return usageError{fmt.Errorf("-o %q: want table or json", a.g.output)}
	}
	if a.g.actor == "" {
		a.g.actor = defaultActor()
	}
	a.log = slog.New(slog.NewTextHandler(a.io.Err, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := admin.Config{
		Etcd:   a.g.etcd,
		Schema: a.g.schema, FenceTable: a.g.fenceTable, OutboxTable: a.g.outboxTable, OutboxParkedTable: a.g.outboxParkedTable,
		SagaTable: a.g.sagaTable, IdemTable: a.g.idemTable, AuditTable: a.g.auditTable,
		Prometheus: a.g.prometheus, Logger: a.log,
	}
	if a.g.dbConfigured(a.io.Getenv) {
		cfg.DB = a.g.database
	}
	adm, err := admin.New(cfg)
	if err != nil {
		return usageError{err}
	}
	a.adm = adm
	return nil
}

func (a *app) close() {
	if a.adm != nil {
		a.adm.Close()
	}
	a.g.close()
}

// ctx bounds one command by --command-timeout.
func (a *app) ctx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), a.g.commandTimeout)
}

// print writes v as JSON, or doc as a table.
func (a *app) print(v any, doc view.Doc) error {
	if a.g.output == "json" {
		return view.JSON(a.io.Out, v)
	}
	return view.Write(a.io.Out, doc)
}

// usageError is a bad flag or argument.
type usageError struct{ error }

// Unwrap returns the cause.
func (e usageError) Unwrap() error { return e.error }

// refusedError is a change that was not confirmed.
type refusedError struct{ error }

// Unwrap returns the cause.
func (e refusedError) Unwrap() error { return e.error }

// args is cobra.ExactArgs(n) whose error is a usageError.
func args(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, got []string) error {
		if len(got) != n {
			return usageError{fmt.Errorf("%s takes %d argument(s): %s; got %d", cmd.CommandPath(), n, names, len(got))}
		}
		return nil
	}
}

// argsUpTo is cobra.MaximumNArgs(n) whose error is a usageError.
func argsUpTo(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, got []string) error {
		if len(got) > n {
			return usageError{fmt.Errorf("%s takes %s; got %d arguments", cmd.CommandPath(), names, len(got))}
		}
		return nil
	}
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
