package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
)

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
	if d.Errors == nil {
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

// sagaListData is the sagas page: one page of the filter's sagas with the
// counts per state.
type sagaListData struct {
	Filter admin.SagaFilter
	Older  string
	Page   admin.SagaPage
	States []string
	Query  url.Values
	First  bool // this is the first page
}

func (s *Server) sagaList(ctx context.Context, r *http.Request) (string, any, error) {
	q := r.URL.Query()
	d := sagaListData{Filter: admin.SagaFilter{Type: q.Get("type"), States: q["state"], Search: q.Get("q"), After: q.Get("after")},
		Older: q.Get("older"), States: admin.SagaStates, Query: q, First: q.Get("after") == ""}
	if d.Older != "" {
		o, err := time.ParseDuration(d.Older)
		if err != nil {
			return "Sagas", d, fmt.Errorf("%w: older than %q: %v", errBadForm, d.Older, err)
		}
		d.Filter.OlderThan = o
	}
	var err error
	d.Page, err = s.adm.SagaPage(ctx, d.Filter)
	return "Sagas", d, err
}

// sagaData is a saga's page.
type sagaData struct {
	admin.Saga
	DataText string // the saga data, pretty, clipped
}

func (s *Server) sagaPage(ctx context.Context, r *http.Request) (string, any, error) {
	id := r.PathValue("id")
	sg, err := s.adm.Saga(ctx, id)
	d := sagaData{Saga: sg}
	if len(sg.Data) > 0 {
		d.DataText = clip(pretty(sg.Data), maxShownData)
	}
	return "Saga " + clip(id, 80), d, err
}

// maxShownData bounds the saga data a page shows.
const maxShownData = 4096

// outboxData is the outbox page: the outbox's figures and one page of the
// filter's parked events.
type outboxData struct {
	Filter admin.ParkedFilter
	Page   admin.ParkedPage
	Query  url.Values
	First  bool
}

func (s *Server) outboxPage(ctx context.Context, r *http.Request) (string, any, error) {
	q := r.URL.Query()
	d := outboxData{Filter: admin.ParkedFilter{Key: q.Get("key"), Topic: q.Get("topic"), Type: q.Get("type"), Search: q.Get("q"), After: q.Get("after")},
		Query: q, First: q.Get("after") == ""}
	var err error
	d.Page, err = s.adm.ParkedPage(ctx, d.Filter)
	return "Outbox", d, err
}

func (s *Server) parkedPage(ctx context.Context, r *http.Request) (string, any, error) {
	p, err := s.adm.ParkedEvent(ctx, r.PathValue("id"))
	return "Parked event", p, err
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
	if d.Leases, err = s.adm.Leases(ctx, ""); err != nil && d.Leases == nil {
		return "Leases and fences", d, err
	} else if err != nil {
		d.Errors = append(d.Errors, err.Error())
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

// auditData is the audit trail, a page at a time (newest first).
type auditData struct {
	Filter  admin.AuditFilter
	Entries []admin.AuditEntry
	Next    int64 // the Before of the next page (0: none)
	Query   url.Values
}

func (s *Server) auditPage(ctx context.Context, r *http.Request) (string, any, error) {
	q := r.URL.Query()
	d := auditData{Filter: admin.AuditFilter{Target: q.Get("target"), Actor: q.Get("actor"), Limit: admin.DefaultPageSize}, Query: q}
	if b := q.Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil {
			return "Audit trail", d, errors.Join(errBadForm, err)
		}
		d.Filter.Before = n
	}
	var err error
	d.Entries, err = s.adm.Audit(ctx, d.Filter)
	if len(d.Entries) == d.Filter.Limit {
		d.Next = d.Entries[len(d.Entries)-1].ID
	}
	return "Audit trail", d, err
}

// tenantSample is how far apart the tenants page's two reads are (its write
// rate estimate).
const tenantSample = time.Second

// tenantsPage is usage against the quotas and etcd's health.
func (s *Server) tenantsPage(ctx context.Context, _ *http.Request) (string, any, error) {
	t, err := s.adm.Tenants(ctx, tenantSample)
	if err != nil && !errors.Is(err, admin.ErrPartial) {
		return "Tenants", admin.Tenants{}, err
	}
	return "Tenants", t, nil // a part it could not read is shown unknown, with why
}

// pagerData is what the "pager" template shows.
type pagerData struct {
	Shown      int
	Total      int64
	Noun, Path string
	Next       string
	First      bool
	Query      url.Values
}

// Pager is the sagas page's pager.
func (d sagaListData) Pager() pagerData {
	return pagerData{Shown: len(d.Page.Sagas), Total: d.Page.Total, Noun: "sagas", Path: "/sagas", Next: d.Page.Next, First: d.First, Query: d.Query}
}

// Pager is the outbox page's pager.
func (d outboxData) Pager() pagerData {
	return pagerData{Shown: len(d.Page.Events), Total: d.Page.Total, Noun: "parked events", Path: "/outbox", Next: d.Page.Next, First: d.First, Query: d.Query}
}
