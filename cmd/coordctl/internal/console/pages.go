package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/audit"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/view"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/saga"
)

// pageNames are the templates/*.html pages besides layout.html.
var pageNames = []string{"overview", "sagas", "saga", "outbox", "leases", "members", "ownership", "audit", "result", "login"}

var funcs = template.FuncMap{
	"ts":  view.TS,
	"tsp": view.TSp,
	"age": view.Age,
	"json": func(v any) string {
		b, _ := json.MarshalIndent(v, "", "  ")
		return string(b)
	},
	"lower": strings.ToLower,
	"deref": func(p any) any {
		switch v := p.(type) {
		case *float64:
			return *v
		case *int:
			return *v
		case *int64:
			return *v
		}
		return p
	},
	"has": func(list []string, s string) bool {
		for _, x := range list {
			if x == s {
				return true
			}
		}
		return false
	},
}

func parsePages() (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, n := range pageNames {
		t, err := template.New(n).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+n+".html")
		if err != nil {
			return nil, err
		}
		out[n] = t
	}
	return out, nil
}

// pageData is what every page template gets.
type pageData struct {
	Page     string
	Title    string
	CSRF     string
	LivePath string // where the live region refreshes from ("" = not live)
	Refresh  int    // milliseconds
	Now      time.Time
	Actor    string
	Data     any
	Error    string
}

// loader reads a page's data.
type loader func(ctx context.Context, r *http.Request) (title string, data any, err error)

// page serves a live page: the whole document, or (with ?fragment=1, which the
// live script asks for) only its live region.
func (s *Server) page(name string, load loader) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pd, status := s.pageData(w, r, name, load)
		tmpl := "layout"
		if r.URL.Query().Get("fragment") == "1" {
			tmpl = "live"
		}
		s.render(w, status, name, tmpl, pd)
	}
}

func (s *Server) pageData(w http.ResponseWriter, r *http.Request, name string, load loader) (pageData, int) {
	actor, _ := s.authenticated(r)
	pd := pageData{Page: name, CSRF: s.csrfToken(w, r), Refresh: int(s.cfg.Refresh.Milliseconds()), Now: time.Now(), Actor: actor}
	q := r.URL.Query()
	q.Del("fragment")
	pd.LivePath = r.URL.Path
	if len(q) > 0 {
		pd.LivePath += "?" + q.Encode()
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	title, data, err := load(ctx, r)
	pd.Title, pd.Data = title, data
	status := http.StatusOK
	if err != nil {
		pd.Error = err.Error()
		status = statusOf(err)
	}
	return pd, status
}

func (s *Server) render(w http.ResponseWriter, status int, page, tmpl string, pd pageData) {
	var b bytes.Buffer
	if err := s.pages[page].ExecuteTemplate(&b, tmpl, pd); err != nil {
		s.log.Error("coordctl: console: render", "page", page, "err", err)
		http.Error(w, "coordctl: render: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

func statusOf(err error) int {
	switch {
	case errors.Is(err, admin.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, saga.ErrNotFound), errors.Is(err, admin.ErrNotFound), errors.Is(err, outbox.ErrNotFound),
		errors.Is(err, correctnesslease.ErrNotFound), errors.Is(err, membership.ErrNotFound), errors.Is(err, ownership.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, saga.ErrWrongState), errors.Is(err, saga.ErrPastPivot):
		return http.StatusUnprocessableEntity
	case errors.Is(err, audit.ErrInvalid), errors.Is(err, saga.ErrInvalidConfig), errors.Is(err, membership.ErrInvalidConfig),
		errors.Is(err, ownership.ErrInvalidConfig), errors.Is(err, errBadForm):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// overviewData is the overview page.
type overviewData struct {
	admin.Overview
	NeedsHumanSagas []admin.Saga
	Parked          []admin.ParkedEvent
}

// overview reads every part; a part it could not read is shown unknown with its
// error (never as zero), and the page is answered 200: what it shows is true.
func (s *Server) overview(ctx context.Context, _ *http.Request) (string, any, error) {
	o, _ := s.adm.Overview(ctx) // a *PartialError: its parts are in o.Errors
	d := overviewData{Overview: o}
	if o.Errors == nil {
		d.Errors = map[string]string{}
	}
	var err error
	if d.NeedsHumanSagas, err = s.adm.Sagas(ctx, admin.SagaFilter{States: []string{"needs_human"}, Limit: 10}); err != nil && o.Errors["sagas"] == "" {
		d.Errors["sagas waiting for a human"] = err.Error()
	}
	if d.Parked, err = s.adm.Parked(ctx, 10); err != nil && o.Errors["outbox"] == "" {
		d.Errors["parked events"] = err.Error()
	}
	return "Overview", d, nil
}

// sagaListData is the sagas page.
type sagaListData struct {
	Filter admin.SagaFilter
	Older  string
	Sagas  []admin.Saga
	States []string
}

func (s *Server) sagaList(ctx context.Context, r *http.Request) (string, any, error) {
	q := r.URL.Query()
	d := sagaListData{Filter: admin.SagaFilter{Type: q.Get("type"), States: q["state"], Limit: 200}, Older: q.Get("older"),
		States: []string{"running", "compensating", "needs_human", "completed", "compensated"}}
	if d.Older != "" {
		o, err := time.ParseDuration(d.Older)
		if err != nil {
			return "Sagas", d, err
		}
		d.Filter.OlderThan = o
	}
	var err error
	d.Sagas, err = s.adm.Sagas(ctx, d.Filter)
	return "Sagas", d, err
}

func (s *Server) sagaPage(ctx context.Context, r *http.Request) (string, any, error) {
	id := r.PathValue("id")
	sg, err := s.adm.Saga(ctx, id)
	return "Saga " + id, sg, err
}

// outboxData is the outbox page.
type outboxData struct {
	Status admin.OutboxStatus
	Parked []admin.ParkedEvent
}

func (s *Server) outboxPage(ctx context.Context, _ *http.Request) (string, any, error) {
	var d outboxData
	var err error
	if d.Status, err = s.adm.OutboxStatus(ctx); err != nil {
		return "Outbox", d, err
	}
	d.Parked, err = s.adm.Parked(ctx, 200)
	return "Outbox", d, err
}

// leasesData is the lease map.
type leasesData struct {
	Leases []admin.Lease
	Fences []admin.Fence
	Errors []string
}

func (s *Server) leasesPage(ctx context.Context, _ *http.Request) (string, any, error) {
	var d leasesData
	var err error
	if d.Leases, err = s.adm.Leases(ctx, ""); err != nil {
		d.Errors = append(d.Errors, "leases: "+err.Error())
	}
	if d.Fences, err = s.adm.Fences(ctx, "", 500); err != nil {
		d.Errors = append(d.Errors, "fences: "+err.Error())
	}
	return "Leases and fences", d, nil
}

// membersData is the members page.
type membersData struct {
	Tenant, Service string
	Services        []admin.Service
}

func (s *Server) membersPage(ctx context.Context, r *http.Request) (string, any, error) {
	q := r.URL.Query()
	d := membersData{Tenant: q.Get("tenant"), Service: q.Get("service")}
	if d.Service != "" && d.Tenant == "" {
		return "Members", d, fmt.Errorf("%w: a service needs its tenant", errBadForm)
	}
	var err error
	d.Services, err = s.adm.Members(ctx, d.Tenant, d.Service)
	return "Members", d, err
}

// ownershipData is the ownership map page.
type ownershipData struct {
	Tenant, Group string
	Groups        []ownershipGroup
}

// ownershipGroup is one group as the page shows it: each member's colour, and
// the partitions listed (every one up to maxPartitionRows, beyond that only
// those not settled).
type ownershipGroup struct {
	admin.OwnershipMap
	Color  map[string]int
	Rows   []admin.PartitionOwner
	Hidden int
}

// maxPartitionRows is the most partitions the page lists one by one; the map
// above the table shows them all.
const maxPartitionRows = 256

func (s *Server) ownershipPage(ctx context.Context, r *http.Request) (string, any, error) {
	q := r.URL.Query()
	d := ownershipData{Tenant: q.Get("tenant"), Group: q.Get("group")}
	if d.Group != "" && d.Tenant == "" {
		return "Ownership", d, fmt.Errorf("%w: a group needs its tenant", errBadForm)
	}
	ms, err := s.adm.Ownership(ctx, d.Tenant, d.Group)
	for _, m := range ms {
		g := ownershipGroup{OwnershipMap: m, Color: map[string]int{}, Rows: m.Owners}
		for i, x := range m.Members {
			g.Color[x.ID] = i % 8
		}
		for _, p := range m.Owners {
			if _, ok := g.Color[p.Owner]; !ok && p.Owner != "" {
				g.Color[p.Owner] = 8 // a holder whose member key is gone
			}
		}
		if len(m.Owners) > maxPartitionRows {
			g.Rows = nil
			for _, p := range m.Owners {
				if p.Owner == "" || p.Owner != p.Target || p.Waiting > 0 {
					g.Rows = append(g.Rows, p)
				}
			}
			g.Hidden = len(m.Owners) - len(g.Rows)
		}
		d.Groups = append(d.Groups, g)
	}
	return "Ownership", d, err
}

func (s *Server) auditPage(ctx context.Context, r *http.Request) (string, any, error) {
	es, err := s.adm.Audit(ctx, r.URL.Query().Get("target"), 200)
	return "Audit trail", es, err
}

var errBadForm = errors.New("coordctl: invalid form")

// resultData is the page after a change.
type resultData struct {
	Action, Target, Back string
	Change               *admin.Change
	Conflict             *admin.ConflictError
}

// act runs one mutation from a form and renders its result.
func (s *Server) act(w http.ResponseWriter, r *http.Request, back string, do func(ctx context.Context, req admin.Request) (admin.Change, error)) {
	action, target := r.PathValue("action"), r.PathValue("id")
	render := func(status int, d resultData, err error) {
		pd := pageData{Page: "result", Title: "Result", CSRF: s.csrfToken(w, r), Now: time.Now(), Data: d}
		if err != nil {
			pd.Error = err.Error()
		}
		s.render(w, status, "result", "layout", pd)
	}
	d := resultData{Action: action, Target: target, Back: back}
	if err := r.ParseForm(); err != nil {
		render(http.StatusBadRequest, d, err)
		return
	}
	if err := s.checkCSRF(r); err != nil {
		render(http.StatusForbidden, d, err)
		return
	}
	actor, _ := s.authenticated(r)
	req := admin.Request{Actor: actor, Via: "console " + r.RemoteAddr, Reason: strings.TrimSpace(r.PostFormValue("reason")),
		Expect: r.PostFormValue("expect"), DryRun: r.PostFormValue("dry_run") == "1"}
	if req.Expect == "" {
		render(http.StatusBadRequest, d, fmt.Errorf("%w: it carries no version: reload the page", errBadForm))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	ch, err := do(ctx, req)
	var ce *admin.ConflictError
	switch {
	case errors.As(err, &ce):
		d.Conflict = ce
		render(http.StatusConflict, d, err)
	case err != nil:
		render(statusOf(err), d, err)
	default:
		d.Change = &ch
		render(http.StatusOK, d, nil)
	}
}

func (s *Server) sagaAction(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	back := "/sagas/" + id
	s.act(w, r, back, func(ctx context.Context, req admin.Request) (admin.Change, error) {
		switch r.PathValue("action") {
		case "retry":
			return s.adm.SagaRetry(ctx, id, req)
		case "cancel":
			return s.adm.SagaCancel(ctx, id, req)
		case "resolve":
			how := saga.Resolution(r.PostFormValue("how"))
			switch how {
			case saga.ResolveCompensated, saga.ResolveRetry, saga.ResolveSkip:
				return s.adm.SagaResolve(ctx, id, how, req)
			}
			return admin.Change{}, fmt.Errorf("%w: resolution %s", errBadForm, strconv.Quote(string(how)))
		}
		return admin.Change{}, fmt.Errorf("%w: action %s", errBadForm, strconv.Quote(r.PathValue("action")))
	})
}

func (s *Server) parkedAction(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.act(w, r, "/outbox", func(ctx context.Context, req admin.Request) (admin.Change, error) {
		switch r.PathValue("action") {
		case "requeue":
			return s.adm.Requeue(ctx, id, req)
		case "discard":
			return s.adm.Discard(ctx, id, req)
		}
		return admin.Change{}, fmt.Errorf("%w: action %s", errBadForm, strconv.Quote(r.PathValue("action")))
	})
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, http.StatusOK, "login", "layout", pageData{Page: "login", Title: "Log in", CSRF: s.csrfToken(w, r), Now: time.Now()})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if err := s.checkCSRF(r); err != nil || s.cfg.Token == "" || !equal(r.PostFormValue("token"), s.cfg.Token) {
		s.log.Warn("coordctl: console login refused", "remote", r.RemoteAddr)
		s.render(w, http.StatusUnauthorized, "login", "layout", pageData{Page: "login", Title: "Log in", CSRF: s.csrfToken(w, r), Now: time.Now(), Error: "wrong token"})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.newSession(), Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: s.tls, MaxAge: int(SessionTTL.Seconds())})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
