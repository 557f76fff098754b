package cli

// The commands of the audit trail and the platform: audit list, tenants, migrate.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/view"
)

func (a *app) auditCmd() *cobra.Command {
	c := &cobra.Command{Use: "audit", Short: "coordctl's audit trail"}
	var target, actor string
	var before int64
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List audit rows, newest first",
		Args:  args(0, ""),
		RunE: show(a, func(ctx context.Context, _ []string) ([]admin.AuditEntry, error) {
			return a.adm.Audit(ctx, admin.AuditFilter{Target: target, Actor: actor, Before: before, Limit: limit})
		}, view.Audit),
	}
	list.Flags().StringVar(&target, "target", "", "only this target (a saga id, event id or lease)")
	list.Flags().StringVar(&actor, "actor", "", "only this actor")
	list.Flags().Int64Var(&before, "before", 0, "only rows older than this id (the next page: the last id shown)")
	list.Flags().IntVar(&limit, "limit", 50, "at most this many rows")
	c.AddCommand(list)
	return c
}

func (a *app) tenantsCmd() *cobra.Command {
	var sample time.Duration
	c := &cobra.Command{
		Use:   "tenants",
		Short: "Per tenant: keys, bytes, leases, watches, write rate against the RFC's quotas; etcd's health",
		Long: `Show every tenant's use of etcd against the quotas of RFC MUST 7 (50 MB, 64 KB per
value, 200 writes/s; and coord's 32 watches), and etcd's health beside it: leader,
alarms, DB size against its quota, WAL fsync, leader changes.

Measured: keys, bytes, the largest value and the leases (every key and value under
/tenants/ read at one revision), the cluster's write rate (its revision's advance).
Estimated: a tenant's write rate, a lower bound (keys changed between two reads
--sample apart). Reported by coordkit's processes (with --prometheus): a tenant's
watches — etcd counts watches only for the whole cluster, so without Prometheus
they are unknown, never 0. The command exits 5 when a part could not be read.`,
		Args: args(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), a.g.commandTimeout+sample)
			defer cancel()
			t, err := a.adm.Tenants(ctx, sample)
			if err != nil && !errors.Is(err, admin.ErrPartial) {
				return err
			}
			if perr := a.print(t, view.Tenants(t)); perr != nil {
				return perr
			}
			return err
		},
	}
	c.Flags().DurationVar(&sample, "sample", time.Second, "how far apart the two reads that estimate write rates are (0: no estimate)")
	return c
}

func (a *app) migrateCmd() *cobra.Command {
	var printSQL bool
	var grants string
	c := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade coordctl's audit table (versioned, in coordkit_migrations)",
		Args:  args(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if grants != "" {
				stmts, err := a.adm.Trail().GrantsSQL(grants)
				if err != nil {
					return err
				}
				if printSQL {
					_, err := fmt.Fprintln(a.io.Out, strings.Join(stmts, ";\n")+";")
					return err
				}
				ctx, cancel := a.ctx(cmd)
				defer cancel()
				if err := a.adm.Grant(ctx, stmts); err != nil {
					return err
				}
				a.log.Info("coordctl: the audit table is append-only for " + grants)
				return nil
			}
			if printSQL {
				for _, s := range a.adm.Trail().MigrationSQL() {
					if _, err := a.io.Out.Write([]byte(s + "\n")); err != nil {
						return err
					}
				}
				return nil
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			if err := a.adm.Migrate(ctx); err != nil {
				return err
			}
			a.log.Info("coordctl: audit table migrated")
			return nil
		},
	}
	c.Flags().BoolVar(&printSQL, "sql", false, "print the SQL instead (for goose, golang-migrate, atlas)")
	c.Flags().StringVar(&grants, "grants", "", "make the audit table append-only for this role, the one coordctl connects as (SELECT, INSERT; run as the table's owner)")
	return c
}
