package cli

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/view"
)

// bulkTimeout is the least time a bulk change gets (its preview and its
// change), whatever --command-timeout says: 5,000 rows take a few seconds.
const bulkTimeout = 2 * time.Minute

// withBulk lets an id command act on many objects instead: with no ID and a
// selection (filter flags, or --all), it previews the selection (count, first
// objects, version), asks, and applies it as one audited change.
func (a *app) withBulk(cmd *cobra.Command, noun string, selected func() (bool, error), do func(ctx context.Context, req admin.Request) (admin.BulkChange, error)) *cobra.Command {
	one := cmd.RunE
	cmd.Use = strings.Replace(cmd.Use, " ID", " [ID | --all | filter flags]", 1)
	cmd.Args = func(cmd *cobra.Command, got []string) error {
		if len(got) > 1 {
			return usageError{fmt.Errorf("%s takes one ID or a selection (filter flags, --all); got %d arguments", cmd.CommandPath(), len(got))}
		}
		return nil
	}
	cmd.RunE = func(cmd *cobra.Command, arg []string) error {
		bulk, err := selected()
		switch {
		case err != nil:
			return usageError{err}
		case len(arg) == 1 && bulk:
			return usageError{fmt.Errorf("%s: an ID or a selection (filter flags, --all), not both", cmd.CommandPath())}
		case len(arg) == 1:
			return one(cmd, arg)
		case !bulk:
			return usageError{fmt.Errorf("%s needs an ID, or a selection: filter flags or --all (see --help)", cmd.CommandPath())}
		}
		return a.runBulk(cmd, noun, do)
	}
	return cmd
}

// runBulk previews the selection, asks (unless --confirm or --dry-run), and
// applies it expecting the version previewed (or --expect's).
func (a *app) runBulk(cmd *cobra.Command, noun string, do func(ctx context.Context, req admin.Request) (admin.BulkChange, error)) error {
	fs := cmd.Flags()
	reason, _ := fs.GetString("reason")
	confirm, _ := fs.GetBool("confirm")
	dryRun, _ := fs.GetBool("dry-run")
	expect, _ := fs.GetString("expect")
	if err := checkReason(reason); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), max(a.g.commandTimeout, bulkTimeout))
	defer cancel()
	req := admin.Request{Actor: a.g.actor, Via: a.via(), Reason: reason, DryRun: true}
	preview, err := do(ctx, req)
	if err != nil {
		return err
	}
	if dryRun {
		return a.print(preview, view.Bulk(preview))
	}
	if preview.Rows == 0 {
		fmt.Fprintf(a.io.Err, "Nothing to %s: the selection (%s) is empty.\n", strings.Split(preview.Action, ".")[1], preview.Target)
		return a.print(preview, view.Bulk(preview))
	}
	what := fmt.Sprintf("%s %d %s (%s)", strings.Split(preview.Action, ".")[1], preview.Rows, noun, preview.Target)
	if !confirm {
		if !a.io.IsTerminal() {
			return refusedError{errorf("refusing to %s without --confirm (--dry-run shows the count; --expect %s acts only on exactly these)", what, preview.Version)}
		}
		if err := view.Write(a.io.Err, view.Bulk(preview)); err != nil {
			return err
		}
		fmt.Fprintf(a.io.Err, "\n%s as %s (reason %q)? Type yes to go on: ", firstUpper(what), a.g.actor, reason)
		line, _ := bufio.NewReader(a.io.In).ReadString('\n')
		if strings.TrimSpace(line) != "yes" {
			return refusedError{errorf("not confirmed: nothing changed")}
		}
	}
	req.DryRun, req.Expect = false, expect
	if req.Expect == "" {
		req.Expect = preview.Version
	}
	ch, err := do(ctx, req)
	if err != nil {
		return err
	}
	return a.print(ch, view.Bulk(ch))
}

// parkedSelection registers the filter flags of a bulk requeue or discard.
func parkedSelection(cmd *cobra.Command) func() (admin.ParkedSelection, bool, error) {
	var sel admin.ParkedSelection
	fs := cmd.Flags()
	fs.StringVar(&sel.Filter.Key, "key", "", "every parked event of this key")
	fs.StringVar(&sel.Filter.Topic, "topic", "", "every parked event of this topic")
	fs.StringVar(&sel.Filter.Type, "type", "", "every parked event of this type")
	fs.StringVar(&sel.Filter.Search, "search", "", "every parked event whose key starts with this or whose last error contains it")
	fs.BoolVar(&sel.All, "all", false, "every parked event")
	return func() (admin.ParkedSelection, bool, error) {
		return sel, sel.All || !sel.Filter.IsZero(), nil
	}
}

// sagaSelection registers the filter flags of a bulk retry.
func sagaSelection(cmd *cobra.Command) func() (admin.SagaSelection, bool, error) {
	var sel admin.SagaSelection
	fs := cmd.Flags()
	fs.StringSliceVar(&sel.Filter.States, "state", nil, "every saga in these states (running, compensating: the others are not retried)")
	fs.StringVar(&sel.Filter.Type, "type", "", "every saga of this type")
	fs.StringVar(&sel.Filter.Search, "search", "", "every saga whose id starts with this or whose last error contains it")
	fs.DurationVar(&sel.Filter.OlderThan, "older-than", 0, "every saga in its state for at least this long")
	fs.BoolVar(&sel.All, "all", false, "every running or compensating saga")
	return func() (admin.SagaSelection, bool, error) {
		f := sel.Filter
		return sel, sel.All || len(f.States) > 0 || f.Type != "" || f.Search != "" || f.OlderThan > 0, nil
	}
}
