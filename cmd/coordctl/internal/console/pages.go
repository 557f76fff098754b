package console

import (
	"bytes"
	"context"
	"errors"
	"html/template"
	"net/http"
	"time"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/audit"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/saga"
)

// Page is one page of the console: its route, its template
// (templates/<Name>.html, defining "live": the region that refreshes), its
// entry in the navigation bar, and how it reads its data. Adding a page (the
// scheduler's, say) is one Page in Server.pages and one template file.
type Page struct {
	Name string // the template's name, and the nav entry's id
	Path string // its route, as http.ServeMux patterns it ("/sagas/{id}")
	// Nav is the navigation bar's label ("" = not in the bar), NavPath its
	// link (default Path), and NavAlso the other pages that light it up.
	Nav     string
	NavPath string
	NavAlso []string
	// Static pages (login, results) are not live.
	Static bool
	Load   loader
}

// loader reads a page's data. A part it could not read is an error: the page
// shows it, and the live stream marks the page stale instead of showing old
// figures as current.
type loader func(ctx context.Context, r *http.Request) (title string, data any, err error)

// navEntry is one link of the navigation bar.
type navEntry struct {
	Name, Label, Path string
	Also              []string
}

// pages are the console's pages, in the navigation bar's order.
func (s *Server) pages() []Page {
	return []Page{
		{Name: "overview", Path: "/{$}", Nav: "Overview", NavPath: "/", Load: s.overview},
		{Name: "sagas", Path: "/sagas", Nav: "Sagas", NavAlso: []string{"saga"}, Load: s.sagaList},
		{Name: "saga", Path: "/sagas/{id}", Load: s.sagaPage},
		{Name: "outbox", Path: "/outbox", Nav: "Outbox", NavAlso: []string{"parked"}, Load: s.outboxPage},
		{Name: "parked", Path: "/outbox/parked/{id}", Load: s.parkedPage},
		{Name: "leases", Path: "/leases", Nav: "Leases", Load: s.leasesPage},
		{Name: "ownership", Path: "/ownership", Nav: "Ownership", Load: s.ownershipPage},
		{Name: "schedule", Path: "/schedule", Nav: "Schedule", Load: s.schedulePage},
		{Name: "members", Path: "/members", Nav: "Members", Load: s.membersPage},
		{Name: "tenants", Path: "/tenants", Nav: "Tenants", Load: s.tenantsPage},
		{Name: "audit", Path: "/audit", Nav: "Audit", Load: s.auditPage},
		{Name: "result", Static: true},
		{Name: "bulk", Static: true},
		{Name: "login", Static: true},
	}
}

func (s *Server) nav() []navEntry {
	var out []navEntry
	for _, p := range s.pages() {
		if p.Nav == "" {
			continue
		}
		e := navEntry{Name: p.Name, Label: p.Nav, Path: p.NavPath, Also: p.NavAlso}
		if e.Path == "" {
			e.Path = p.Path
		}
		out = append(out, e)
	}
	return out
}

func parsePages(ps []Page) (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, p := range ps {
		t, err := template.New(p.Name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+p.Name+".html")
		if err != nil {
			return nil, err
		}
		out[p.Name] = t
	}
	return out, nil
}

// pageData is what every page template gets.
type pageData struct {
	Page     string
	Title    string
	CSRF     string
	LivePath string // where the live region refreshes from ("" = not live)
	Digest   string // of the live region as rendered: the stream's baseline
	Skeleton string // of the region's skeleton (all but its parts): the stream sends parts while it holds
	Refresh  int    // milliseconds
	Now      time.Time
	Actor    string
	Nav      []navEntry
	Data     any
	Error    string
}

// page serves a live page: the whole document, or (with ?fragment=1, which the
// live stream asks for) only its live region. A load error is the page's
// status; the stream reads it from the X-Coordctl-Error header.
func (s *Server) page(name string, load loader) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pd, status := s.pageData(w, r, name, load)
		if r.URL.Query().Get("fragment") == "1" {
			if pd.Error != "" {
				w.Header().Set("X-Coordctl-Error", headerSafe(pd.Error))
			}
			s.render(w, status, name, "live", pd)
			return
		}
		var region bytes.Buffer
		if err := s.tmpl[name].ExecuteTemplate(&region, "live", pd); err == nil {
			pd.Digest = digest(region.Bytes())
			pd.Skeleton = digest([]byte(splitRegion(region.Bytes()).skeleton))
		}
		s.render(w, status, name, "layout", pd)
	}
}

func (s *Server) pageData(w http.ResponseWriter, r *http.Request, name string, load loader) (pageData, int) {
	id, _ := s.authenticated(r)
	pd := pageData{Page: name, CSRF: s.csrfToken(w, r), Refresh: int(s.cfg.Refresh.Milliseconds()), Now: time.Now(), Actor: id.Actor, Nav: s.nav()}
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
	if pd.Nav == nil {
		pd.Nav = s.nav()
	}
	var b bytes.Buffer
	if err := s.tmpl[page].ExecuteTemplate(&b, tmpl, pd); err != nil {
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
	case errors.Is(err, audit.ErrInvalid), errors.Is(err, admin.ErrInvalidArg), errors.Is(err, saga.ErrInvalidConfig), errors.Is(err, membership.ErrInvalidConfig),
		errors.Is(err, ownership.ErrInvalidConfig), errors.Is(err, outbox.ErrInvalidConfig), errors.Is(err, errBadForm):
		return http.StatusBadRequest
	case errors.Is(err, admin.ErrPartial):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

var errBadForm = errors.New("coordctl: invalid form")
