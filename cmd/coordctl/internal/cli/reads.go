package cli

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/view"
)

func (a *app) overviewCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "overview",
		Short: "Leases held, fence rejections, outbox lag, sagas by state, needs_human",
		Args:  args(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			o, blind := a.adm.Overview(ctx)
			if err := a.print(o, view.Overview(o)); err != nil {
				return err
			}
			return blind // what could not be read: exit ExitBlind
		},
	}
}

func (a *app) leasesCmd() *cobra.Command {
	c := &cobra.Command{Use: "leases", Short: "Correctness leases in etcd: holder, token, waiters, fence"}
	var tenant string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the leases that have a holder or a waiter",
		Args:  args(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			ls, err := a.adm.Leases(ctx, tenant)
			if err != nil && !errors.Is(err, admin.ErrPartial) {
				return err
			}
			if perr := a.print(ls, view.Leases(ls)); perr != nil {
				return perr
			}
			return err // the fence rows could not be read: FENCE shows ?
		},
	}
	list.Flags().StringVar(&tenant, "tenant", "", "only this tenant (default: every tenant) (env COORDCTL_TENANT)")
	get := &cobra.Command{
		Use:   "get TENANT NAME",
		Short: "Show one lease's holder and queue",
		Args:  args(2, "TENANT NAME"),
		RunE: func(cmd *cobra.Command, arg []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			l, err := a.adm.Lease(ctx, arg[0], arg[1])
			if err != nil && !errors.Is(err, admin.ErrPartial) {
				return err
			}
			if perr := a.print(l, view.Lease(l)); perr != nil {
				return perr
			}
			return err
		},
	}
	c.AddCommand(list, get)
	return c
}

func (a *app) membersCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "members [TENANT [SERVICE]]",
		Short: "Registered instances (package membership): address, metadata, lease, since",
		Long: `List the instances registered with package membership, one table per service:
instance, address, metadata, etcd lease and the revision it registered at. Without
arguments, every service of every tenant; with TENANT, that tenant's services; with
TENANT SERVICE, that service (shown even when nobody is registered).`,
		Args: argsUpTo(2, "[TENANT [SERVICE]]"),
		RunE: show(a, func(ctx context.Context, arg []string) ([]admin.Service, error) {
			arg = append(arg, "", "")
			return a.adm.Members(ctx, arg[0], arg[1])
		}, view.Members),
	}
}

func (a *app) ownershipCmd() *cobra.Command {
	c := &cobra.Command{Use: "ownership", Short: "Partition ownership groups (package ownership)"}
	m := &cobra.Command{
		Use:   "map [TENANT [GROUP]]",
		Short: "Partition → owner, target, token, since; unowned and moving counts",
		Long: `Show ownership groups' maps: for each partition the member holding it, the member the
assignment gives it to, the holder's fencing token and the revision it holds it
since, and how many members wait for it. Without arguments, every group of every
tenant; with TENANT, that tenant's groups; with TENANT GROUP, that group.`,
		Args: argsUpTo(2, "[TENANT [GROUP]]"),
		RunE: show(a, func(ctx context.Context, arg []string) ([]admin.OwnershipMap, error) {
			arg = append(arg, "", "")
			return a.adm.Ownership(ctx, arg[0], arg[1])
		}, view.Ownership),
	}
	c.AddCommand(m)
	return c
}

func (a *app) fencesCmd() *cobra.Command {
	c := &cobra.Command{Use: "fences", Short: "pgfence rows: the highest token each lease presented"}
	var prefix, after string
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List fence rows",
		Args:  args(0, ""),
		RunE: show(a, func(ctx context.Context, _ []string) ([]admin.Fence, error) {
			return a.adm.FencesAfter(ctx, prefix, after, limit)
		}, view.Fences),
	}
	list.Flags().StringVar(&prefix, "prefix", "", "only leases starting with this (e.g. /tenants/acme/)")
	list.Flags().StringVar(&after, "after", "", "the page after this lease (the last one a list printed)")
	list.Flags().IntVar(&limit, "limit", 100, "at most this many rows")
	get := &cobra.Command{
		Use:   "get LEASE",
		Short: "Show one lease's fence row and its audited resets",
		Args:  args(1, "LEASE (/tenants/T/elections/NAME)"),
		RunE:  show(a, func(ctx context.Context, arg []string) (admin.Fence, error) { return a.adm.Fence(ctx, arg[0]) }, view.Fence),
	}
	c.AddCommand(list, get, a.fenceResetCmd())
	return c
}

func (a *app) outboxCmd() *cobra.Command {
	c := &cobra.Command{Use: "outbox", Short: "The transactional outbox: backlog, lag, parked events"}
	status := &cobra.Command{
		Use:   "status",
		Short: "Backlog, oldest pending age, publish lag, parked events by key",
		Args:  args(0, ""),
		RunE:  show(a, func(ctx context.Context, _ []string) (admin.OutboxStatus, error) { return a.adm.OutboxStatus(ctx) }, view.OutboxStatus),
	}
	parked := &cobra.Command{Use: "parked", Short: "Events the relay parked (dead letters): list, requeue, discard"}
	var pf admin.ParkedFilter
	list := &cobra.Command{
		Use:   "list",
		Short: "List parked events in outbox order, a page at a time, with how many match",
		Args:  args(0, ""),
		RunE:  show(a, func(ctx context.Context, _ []string) (admin.ParkedPage, error) { return a.adm.ParkedPage(ctx, pf) }, view.ParkedPage),
	}
	list.Flags().StringVar(&pf.Key, "key", "", "only this key")
	list.Flags().StringVar(&pf.Topic, "topic", "", "only this topic")
	list.Flags().StringVar(&pf.Type, "type", "", "only this event type")
	list.Flags().StringVar(&pf.Search, "search", "", "only events whose key starts with this or whose last error contains it (case-insensitive)")
	list.Flags().StringVar(&pf.After, "after", "", "the page after this one (the Next page value a list printed)")
	list.Flags().IntVar(&pf.Limit, "limit", admin.DefaultPageSize, "at most this many events per page (1-1000)")
	parked.AddCommand(list, a.requeueCmd(), a.discardCmd())
	c.AddCommand(status, parked)
	return c
}

func (a *app) sagaCmd() *cobra.Command {
	c := &cobra.Command{Use: "saga", Short: "Sagas: list, get, retry, resolve, cancel"}
	var f admin.SagaFilter
	list := &cobra.Command{
		Use:   "list",
		Short: "List sagas oldest in their state first, a page at a time, with counts per state",
		Args:  args(0, ""),
		RunE:  show(a, func(ctx context.Context, _ []string) (admin.SagaPage, error) { return a.adm.SagaPage(ctx, f) }, view.SagaPage),
	}
	list.Flags().StringSliceVar(&f.States, "state", nil, "only these states: running, compensating, completed, compensated, needs_human")
	list.Flags().StringVar(&f.Type, "type", "", "only this saga type")
	list.Flags().DurationVar(&f.OlderThan, "older-than", 0, "only sagas in their state for at least this long (e.g. 10m)")
	list.Flags().StringVar(&f.Search, "search", "", "only sagas whose id starts with this or whose last error contains it (case-insensitive)")
	list.Flags().StringVar(&f.After, "after", "", "the page after this one (the Next page value a list printed)")
	list.Flags().IntVar(&f.Limit, "limit", admin.DefaultPageSize, "at most this many sagas per page (1-1000)")
	_ = list.RegisterFlagCompletionFunc("state", cobra.FixedCompletions(
		[]string{"running", "compensating", "completed", "compensated", "needs_human"}, cobra.ShellCompDirectiveNoFileComp))
	get := &cobra.Command{
		Use:   "get ID",
		Short: "Show a saga: its steps with attempts and errors, and its version",
		Args:  args(1, "ID"),
		RunE:  show(a, func(ctx context.Context, arg []string) (admin.Saga, error) { return a.adm.Saga(ctx, arg[0]) }, view.Saga),
	}
	c.AddCommand(list, get, a.sagaRetryCmd(), a.sagaResolveCmd(), a.sagaCancelCmd())
	return c
}

func (a *app) idemCmd() *cobra.Command {
	c := &cobra.Command{Use: "idem", Short: "Idempotency keys"}
	get := &cobra.Command{
		Use:   "get SCOPE KEY",
		Short: "Show one key's state and stored response metadata",
		Args:  args(2, "SCOPE KEY"),
		RunE:  show(a, func(ctx context.Context, arg []string) (admin.IdemKey, error) { return a.adm.Idem(ctx, arg[0], arg[1]) }, view.Idem),
	}
	c.AddCommand(get)
	return c
}

func (a *app) configCmd() *cobra.Command {
	c := &cobra.Command{Use: "config", Short: "Fail-static config: what etcd holds, how stale a service's copy is"}
	var prefix bool
	get := &cobra.Command{
		Use:   "get TENANT [NAME]",
		Short: "Read /tenants/TENANT/config/NAME (every config key of the tenant without NAME)",
		Args: func(cmd *cobra.Command, got []string) error {
			if len(got) < 1 || len(got) > 2 {
				return usageError{errorf("%s takes TENANT [NAME]", cmd.CommandPath())}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, arg []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			name := ""
			if len(arg) == 2 {
				name = arg[1]
			}
			r, err := a.adm.Config(ctx, arg[0], name, prefix)
			if err != nil {
				return err
			}
			return a.print(r, view.Config(r))
		},
	}
	get.Flags().BoolVar(&prefix, "prefix", false, "NAME is a prefix: read every key under it")
	staleness := &cobra.Command{
		Use:   "staleness STATE_FILE",
		Short: "Read a service's last-known-good state file (failstatic Config.StatePath) and compare it with etcd",
		Args:  args(1, "STATE_FILE"),
		RunE: show(a, func(ctx context.Context, arg []string) (admin.Staleness, error) {
			return a.adm.ConfigStaleness(ctx, arg[0])
		}, view.Staleness),
	}
	c.AddCommand(get, staleness)
	return c
}
