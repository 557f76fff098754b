package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
)

// scheduleData is the schedule page: the jobs of package schedule, each with
// its last and next fires and its verbs.
type scheduleData struct {
	Tenant string
	Jobs   []admin.ScheduleJob
}

func (s *Server) schedulePage(ctx context.Context, r *http.Request) (string, any, error) {
	d := scheduleData{Tenant: r.URL.Query().Get("tenant")}
	var err error
	d.Jobs, err = s.adm.ScheduleJobList(ctx, d.Tenant)
	return "Schedule", d, err
}

// scheduleAction runs a verb on a job (POST /schedule/{tenant}/{id}/{action},
// id the job): audited, compare-and-set on the version shown.
func (s *Server) scheduleAction(w http.ResponseWriter, r *http.Request) {
	tenant, job, verb := r.PathValue("tenant"), r.PathValue("id"), r.PathValue("action")
	s.act(w, r, "/schedule?tenant="+tenant, func(ctx context.Context, req admin.Request) (admin.Change, error) {
		if !slices.Contains(admin.ScheduleVerbs, verb) {
			return admin.Change{}, fmt.Errorf("%w: action %s", errBadForm, strconv.Quote(verb))
		}
		var from, to time.Time
		if verb == "backfill" {
			var err error
			if from, err = time.Parse("2006-01-02T15:04", r.PostFormValue("from")); err != nil {
				return admin.Change{}, fmt.Errorf("%w: from %q: %v", errBadForm, r.PostFormValue("from"), err)
			}
			if to, err = time.Parse("2006-01-02T15:04", r.PostFormValue("to")); err != nil {
				return admin.Change{}, fmt.Errorf("%w: to %q: %v", errBadForm, r.PostFormValue("to"), err)
			}
		}
		return s.adm.ScheduleChange(ctx, tenant, job, verb, from, to, req)
	})
}
