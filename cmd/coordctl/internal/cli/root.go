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
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/audit"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/view"
	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/saga"
)

// Exit codes.
const (
	ExitOK       = 0
	ExitError    = 1
	ExitUsage    = 2 // a bad flag, argument or subcommand: nothing was read or changed
	ExitConflict = 3 // the state changed since it was shown: nothing was done
	ExitRefused  = 4 // a change without --confirm (or a "no" at the prompt)
	ExitBlind    = 5 // some of the state could not be read: what was printed is partial, its unknowns say so
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
	code := exitCode(err)
	if a.g.output == "json" {
		_ = view.JSON(sio.Err, jsonError(err, code))
	} else {
		fmt.Fprintln(sio.Err, "Error:", err)
	}
	return code
}

// exitCode classifies err: a conflict, a refusal, a bad argument (coordctl's
// own checks and the SDK's validation alike: nothing was read or changed), a
// partial view, or any other error.
func exitCode(err error) int {
	var ce *admin.ConflictError
	var refused refusedError
	var usage usageError
	switch {
	case errors.As(err, &ce):
		return ExitConflict
	case errors.As(err, &refused):
		return ExitRefused
	case errors.As(err, &usage), badArgument(err):
		return ExitUsage
	case errors.Is(err, admin.ErrPartial):
		return ExitBlind
	}
	return ExitError
}

// badArgument reports whether err is a validation error: an argument that
// was refused before any server was asked.
func badArgument(err error) bool {
	for _, s := range []error{admin.ErrInvalidArg, audit.ErrInvalid, coord.ErrInvalidName, coord.ErrInvalidToken, saga.ErrInvalidConfig,
		outbox.ErrInvalidConfig, outbox.ErrInvalidID, pgfence.ErrInvalidConfig, membership.ErrInvalidConfig, ownership.ErrInvalidConfig,
		correctnesslease.ErrInvalidConfig, idempotency.ErrInvalidKey} {
		if errors.Is(err, s) {
			return true
		}
	}
	return strings.HasPrefix(err.Error(), "unknown command ") || strings.HasPrefix(err.Error(), "unknown flag")
}

// jsonErr is an error as -o json prints it (on stderr).
type jsonErr struct {
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
	Kind     string `json:"kind"`              // error, usage, conflict, refused, partial
	Current  any    `json:"current,omitempty"` // a conflict's state now
	AuditID  int64  `json:"audit_id,omitempty"`
}

func jsonError(err error, code int) jsonErr {
	e := jsonErr{Error: err.Error(), ExitCode: code, Kind: map[int]string{ExitError: "error", ExitUsage: "usage", ExitConflict: "conflict",
		ExitRefused: "refused", ExitBlind: "partial"}[code]}
	var ce *admin.ConflictError
	if errors.As(err, &ce) {
		e.Current, e.AuditID = ce.Current, ce.AuditID
	}
	return e
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
	root.AddCommand(a.overviewCmd(), a.leasesCmd(), a.membersCmd(), a.ownershipCmd(), a.scheduleCmd(), a.tenantsCmd(), a.fencesCmd(), a.outboxCmd(), a.sagaCmd(), a.idemCmd(),
		a.configCmd(), a.auditCmd(), a.migrateCmd(), a.serveCmd())
	groups(root)
	return root
}

// groups makes every command that only holds subcommands refuse to run
// without one, or with one it does not know (exit 2), instead of printing its
// help and exiting 0 as if something had been done.
func groups(c *cobra.Command) {
	for _, sub := range c.Commands() {
		groups(sub)
	}
	if c.HasParent() && c.HasSubCommands() && c.RunE == nil && c.Run == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			var names []string
			for _, sub := range cmd.Commands() {
				if sub.IsAvailableCommand() {
					names = append(names, sub.Name())
				}
			}
			if len(args) == 0 {
				return usageError{fmt.Errorf("%s needs a subcommand: %s", cmd.CommandPath(), strings.Join(names, ", "))}
			}
			return usageError{fmt.Errorf("unknown subcommand %q for %s: want %s", args[0], cmd.CommandPath(), strings.Join(names, ", "))}
		}
	}
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
		Prometheus: a.g.prometheus, Logger: a.log, EtcdMetrics: a.g.metricsURLs(),
	}
	if t, err := a.g.etcdTLS(); err != nil {
		return usageError{err}
	} else if t != nil {
		cfg.HTTPClient = &http.Client{Transport: &http.Transport{TLSClientConfig: t}, Timeout: 10 * time.Second}
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

// show is the RunE of a command that reads: read, bounded by the command
// timeout, then print what it read (render is its table).
func show[T any](a *app, read func(ctx context.Context, arg []string) (T, error), render func(T) view.Doc) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, arg []string) error {
		ctx, cancel := a.ctx(cmd)
		defer cancel()
		v, err := read(ctx, arg)
		if err != nil {
			return err
		}
		return a.print(v, render(v))
	}
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

// isTerminal reports whether r is an interactive terminal: a file whose
// terminal attributes can be read. /dev/null is a character device but no
// terminal (a prompt read from it would see end of file).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
