package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/view"
	"github.com/coordkit/coordkit/saga"
)

func errorf(format string, v ...any) error { return fmt.Errorf(format, v...) }

// change are the flags of every command that changes something.
type change struct {
	reason  string
	confirm bool
	dryRun  bool
	expect  string
}

func (c *change) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.reason, "reason", "", "why (required): recorded in the audit table")
	cmd.Flags().BoolVar(&c.confirm, "confirm", false, "do it without asking (coordctl is read-only otherwise)")
	cmd.Flags().BoolVar(&c.dryRun, "dry-run", false, "show what would change; change nothing, write no audit row")
	cmd.Flags().StringVar(&c.expect, "expect", "", "act only if the object still has this version (from get/list); default: the version shown now")
}

// mutation is one change command: show reads the object (its version is what
// the change then expects) and renders it, do applies it, doc renders a
// Change's before and after.
type mutation struct {
	what string // "retry saga 0123", for the prompt
	show func(ctx context.Context) (version string, doc view.Doc, err error)
	do   func(ctx context.Context, req admin.Request) (admin.Change, error)
	doc  func(any) view.Doc
}

// run shows the object, asks (unless --confirm or --dry-run), applies with
// compare-and-set on the version shown, and prints the change.
func run(a *app, cmd *cobra.Command, c *change, m mutation) error {
	if err := checkReason(c.reason); err != nil {
		return err
	}
	ctx, cancel := a.ctx(cmd)
	defer cancel()
	ver, doc, err := m.show(ctx)
	if err != nil {
		return err
	}
	req := admin.Request{Actor: a.g.actor, Via: a.via(), Reason: c.reason, Expect: c.expect, DryRun: c.dryRun}
	if req.Expect == "" {
		req.Expect = ver
	}
	if !c.dryRun && !c.confirm {
		if !a.io.IsTerminal() {
			return refusedError{errorf("refusing to %s without --confirm (coordctl is read-only otherwise; --dry-run shows what would change)", m.what)}
		}
		if err := view.Write(a.io.Err, doc); err != nil {
			return err
		}
		fmt.Fprintf(a.io.Err, "\n%s as %s (reason %q)? Type yes to go on: ", firstUpper(m.what), a.g.actor, c.reason)
		line, _ := bufio.NewReader(a.io.In).ReadString('\n')
		if strings.TrimSpace(line) != "yes" {
			return refusedError{errorf("not confirmed: nothing changed")}
		}
	}
	ch, err := m.do(ctx, req)
	var ce *admin.ConflictError
	if errors.As(err, &ce) && a.g.output == "table" && ce.Current != nil {
		fmt.Fprintln(a.io.Err, "The state now:")
		_ = view.Write(a.io.Err, m.doc(ce.Current))
	}
	if err != nil {
		return err
	}
	return a.print(ch, view.Change(ch, m.doc(ch.Before), m.doc(ch.After)))
}

// idMutation is a change command on one object named by its id.
func (a *app) idMutation(use, short, noun string, show func(ctx context.Context, id string) (string, view.Doc, error),
	do func(ctx context.Context, id string, req admin.Request) (admin.Change, error), doc func(any) view.Doc) *cobra.Command {
	var c change
	cmd := &cobra.Command{
		Use:   use + " ID",
		Short: short,
		Args:  args(1, "ID"),
		RunE: func(cmd *cobra.Command, arg []string) error {
			id := arg[0]
			return run(a, cmd, &c, mutation{
				what: use + " " + noun + " " + id,
				show: func(ctx context.Context) (string, view.Doc, error) { return show(ctx, id) },
				do:   func(ctx context.Context, req admin.Request) (admin.Change, error) { return do(ctx, id, req) },
				doc:  doc,
			})
		},
	}
	c.register(cmd)
	return cmd
}

func checkReason(r string) error {
	if r == "" {
		return usageError{errorf("--reason is required: say why, it goes into the audit table")}
	}
	return nil
}

func firstUpper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func sagaDoc(v any) view.Doc {
	if s, ok := v.(admin.Saga); ok {
		return view.Saga(s)[:1]
	}
	return nil
}

func (a *app) sagaMutationCmd(use, short string, do func(ctx context.Context, id string, req admin.Request) (admin.Change, error)) *cobra.Command {
	show := func(ctx context.Context, id string) (string, view.Doc, error) {
		s, err := a.adm.Saga(ctx, id)
		return s.Version, view.Saga(s), err
	}
	return a.idMutation(use, short, "saga", show, do, sagaDoc)
}

func (a *app) sagaRetryCmd() *cobra.Command {
	cmd := a.sagaMutationCmd("retry", "Make a running or compensating saga due now (skip its backoff); with a filter, every one it selects", func(ctx context.Context, id string, req admin.Request) (admin.Change, error) {
		return a.adm.SagaRetry(ctx, id, req)
	})
	sel := sagaSelection(cmd)
	return a.withBulk(cmd, "sagas", func() (bool, error) { _, ok, err := sel(); return ok, err },
		func(ctx context.Context, req admin.Request) (admin.BulkChange, error) {
			s, _, _ := sel()
			return a.adm.SagaRetryBulk(ctx, s, req)
		})
}

func (a *app) sagaCancelCmd() *cobra.Command {
	return a.sagaMutationCmd("cancel", "Stop a running saga before its pivot and compensate what it did", func(ctx context.Context, id string, req admin.Request) (admin.Change, error) {
		return a.adm.SagaCancel(ctx, id, req)
	})
}

func (a *app) sagaResolveCmd() *cobra.Command {
	var how string
	cmd := a.sagaMutationCmd("resolve", "Take a needs_human saga out of that state: --how compensated, retry or skip",
		func(ctx context.Context, id string, req admin.Request) (admin.Change, error) {
			switch saga.Resolution(how) {
			case saga.ResolveCompensated, saga.ResolveRetry, saga.ResolveSkip:
			default:
				return admin.Change{}, usageError{errorf("--how %q: want compensated, retry or skip", how)}
			}
			return a.adm.SagaResolve(ctx, id, saga.Resolution(how), req)
		})
	cmd.PreRunE = func(*cobra.Command, []string) error { // before the saga is shown and "yes" is asked for
		switch saga.Resolution(how) {
		case saga.ResolveCompensated, saga.ResolveRetry, saga.ResolveSkip:
			return nil
		}
		return usageError{errorf("--how %q: want compensated, retry or skip", how)}
	}
	cmd.Flags().StringVar(&how, "how", "", "compensated (undone by hand), retry (the cause is fixed), skip (this step undone by hand)")
	_ = cmd.RegisterFlagCompletionFunc("how", cobra.FixedCompletions([]string{"compensated", "retry", "skip"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func parkedDoc(v any) view.Doc {
	switch p := v.(type) {
	case admin.ParkedEvent:
		return view.ParkedEvent(p)
	case admin.ParkedOutcome:
		return view.ParkedOutcome(p)
	}
	return nil
}

func (a *app) parkedCmd(use, short string, do func(ctx context.Context, id string, req admin.Request) (admin.Change, error)) *cobra.Command {
	show := func(ctx context.Context, id string) (string, view.Doc, error) {
		p, err := a.adm.ParkedEvent(ctx, id)
		return p.Version, view.ParkedEvent(p), err
	}
	return a.idMutation(use, short, "parked event", show, do, parkedDoc)
}

func (a *app) requeueCmd() *cobra.Command {
	cmd := a.parkedCmd("requeue", "Put a parked event back into the outbox (its key flows again); with a filter, every one it selects", func(ctx context.Context, id string, req admin.Request) (admin.Change, error) {
		return a.adm.Requeue(ctx, id, req)
	})
	return a.parkedBulk(cmd, "requeue")
}

func (a *app) parkedBulk(cmd *cobra.Command, action string) *cobra.Command {
	sel := parkedSelection(cmd)
	return a.withBulk(cmd, "parked events", func() (bool, error) { _, ok, err := sel(); return ok, err },
		func(ctx context.Context, req admin.Request) (admin.BulkChange, error) {
			s, _, _ := sel()
			return a.adm.ParkedBulk(ctx, action, s, req)
		})
}

func (a *app) discardCmd() *cobra.Command {
	cmd := a.parkedCmd("discard", "Delete a parked event for good (its key's later events flow); with a filter, every one it selects", func(ctx context.Context, id string, req admin.Request) (admin.Change, error) {
		return a.adm.Discard(ctx, id, req)
	})
	return a.parkedBulk(cmd, "discard")
}

func (a *app) fenceResetCmd() *cobra.Command {
	var c change
	var to int64
	cmd := &cobra.Command{
		Use:   "reset LEASE --to N",
		Short: "Record N as the lease's highest token (0 deletes the row): after a forged token or an etcd restore",
		Args:  args(1, "LEASE"),
		RunE: func(cmd *cobra.Command, arg []string) error {
			lease := arg[0]
			if to < 0 {
				return usageError{errorf("--to %d: must not be negative", to)}
			}
			if err := admin.CheckResetLease(lease); err != nil {
				return err
			}
			return run(a, cmd, &c, mutation{
				what: fmt.Sprintf("reset the fence of %s to %d", lease, to),
				show: func(ctx context.Context) (string, view.Doc, error) {
					f, err := a.adm.Fence(ctx, lease)
					if err == nil && f.Highest == 0 {
						err = fmt.Errorf("%w: %s has no fence row: nothing to reset (no token of it was ever fenced; `coordctl fences list` shows the leases that have one)", admin.ErrNotFound, lease)
					}
					return f.Version, view.Fence(f), err
				},
				do: func(ctx context.Context, req admin.Request) (admin.Change, error) {
					return a.adm.FenceReset(ctx, lease, to, req)
				},
				doc: func(v any) view.Doc {
					if f, ok := v.(admin.Fence); ok {
						return view.Fence(f)[:1]
					}
					return nil
				},
			})
		},
	}
	c.register(cmd)
	cmd.Flags().Int64Var(&to, "to", 0, "the revision to record (0: delete the row, accept any next token)")
	return cmd
}
