package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/view"
)

// scheduleCmd is `coordctl schedule`: package schedule's jobs and their verbs.
func (a *app) scheduleCmd() *cobra.Command {
	c := &cobra.Command{Use: "schedule", Short: "Scheduled jobs (package schedule): next and last fires, pause, resume, trigger, skip, backfill"}
	list := &cobra.Command{
		Use:   "list [TENANT]",
		Short: "Every job with its schedule, last fire and outcome, last success, next fire",
		Args:  argsUpTo(1, "[TENANT]"),
		RunE: show(a, func(ctx context.Context, arg []string) ([]admin.ScheduleJob, error) {
			arg = append(arg, "")
			return a.adm.ScheduleJobList(ctx, arg[0])
		}, view.ScheduleJobs),
	}
	get := &cobra.Command{
		Use:   "get TENANT JOB",
		Short: "One job: its schedule and policies, last and next fires, unfinished runs",
		Args:  args(2, "TENANT JOB"),
		RunE: show(a, func(ctx context.Context, arg []string) (admin.ScheduleJob, error) {
			return a.adm.ScheduleJobGet(ctx, arg[0], arg[1])
		}, view.ScheduleJob),
	}
	c.AddCommand(list, get)
	for _, verb := range admin.ScheduleVerbs {
		c.AddCommand(a.scheduleChangeCmd(verb))
	}
	return c
}

var scheduleVerbHelp = map[string]string{
	"pause":     "Pause a job: its scheduled fires are recorded missed (paused) until resume",
	"resume":    "Resume a paused job",
	"trigger":   "Fire a job now (a manual fire; its owner runs it within its poll interval)",
	"skip-next": "Record the job's next scheduled fire as skipped: it does not run",
	"backfill":  "Run the scheduled fires of [--from, --to) that have no record or were missed, once each",
}

func (a *app) scheduleChangeCmd(verb string) *cobra.Command {
	var c change
	var from, to string
	use := verb + " TENANT JOB"
	if verb == "backfill" {
		use += " --from T --to T"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: scheduleVerbHelp[verb],
		Args:  args(2, "TENANT JOB"),
		RunE: func(cmd *cobra.Command, arg []string) error {
			tenant, job := arg[0], arg[1]
			var f, t time.Time
			if verb == "backfill" {
				var err error
				if f, err = time.Parse(time.RFC3339, from); err != nil {
					return usageError{errorf("--from %q: an RFC 3339 time (2026-12-01T09:00:00Z)", from)}
				}
				if t, err = time.Parse(time.RFC3339, to); err != nil {
					return usageError{errorf("--to %q: an RFC 3339 time (2026-12-01T10:00:00Z)", to)}
				}
			}
			return run(a, cmd, &c, mutation{
				what: fmt.Sprintf("%s the job %s/%s", verb, tenant, job),
				show: func(ctx context.Context) (string, view.Doc, error) {
					j, err := a.adm.ScheduleJobGet(ctx, tenant, job)
					return j.Version, view.ScheduleJob(j), err
				},
				do: func(ctx context.Context, req admin.Request) (admin.Change, error) {
					return a.adm.ScheduleChange(ctx, tenant, job, verb, f, t, req)
				},
				doc: func(v any) view.Doc {
					if j, ok := v.(admin.ScheduleJob); ok {
						return view.ScheduleJob(j)
					}
					return nil
				},
			})
		},
	}
	c.register(cmd)
	if verb == "backfill" {
		cmd.Flags().StringVar(&from, "from", "", "the range's start, RFC 3339 (required)")
		cmd.Flags().StringVar(&to, "to", "", "the range's end, excluded, RFC 3339 (required)")
	}
	return cmd
}
