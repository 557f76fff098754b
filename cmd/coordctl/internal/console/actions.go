package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/view"
	"github.com/coordkit/coordkit/saga"
)

// resultData is the page after a change.
type resultData struct {
	Action, Target, Back string
	Change               *admin.Change
	Conflict             *admin.ConflictError
	Before, After, Now   view.Doc
}

// request reads who asks and why from a mutating form, after its CSRF check.
func (s *Server) request(r *http.Request) (admin.Request, error) {
	if err := r.ParseForm(); err != nil {
		return admin.Request{}, errors.Join(errBadForm, err)
	}
	if err := s.checkCSRF(r); err != nil {
		return admin.Request{}, err
	}
	id, _ := s.authenticated(r)
	return admin.Request{Actor: id.Actor, Via: "console " + r.RemoteAddr + " (" + id.Method + ")", Reason: strings.TrimSpace(r.PostFormValue("reason")),
		Expect: r.PostFormValue("expect"), DryRun: r.PostFormValue("dry_run") == "1"}, nil
}

// renderer renders page after a form: the data data returns when it is
// called, and the error, if any, with the status given.
func (s *Server) renderer(w http.ResponseWriter, r *http.Request, page, title string, data func() any) func(status int, err error) {
	return func(status int, err error) {
		pd := pageData{Page: page, Title: title, CSRF: s.csrfToken(w, r), Now: time.Now(), Data: data()}
		if err != nil {
			pd.Error = err.Error()
		}
		s.render(w, status, page, "layout", pd)
	}
}

// formRequest reads a mutating form's request; a refused form is rendered
// (403 when its CSRF check failed, 400 otherwise) and ok is false.
func (s *Server) formRequest(r *http.Request, render func(int, error)) (req admin.Request, ok bool) {
	req, err := s.request(r)
	switch {
	case errors.Is(err, errCSRF):
		render(http.StatusForbidden, err)
		return req, false
	case err != nil:
		render(http.StatusBadRequest, err)
		return req, false
	}
	return req, true
}

// act runs one mutation from a form and renders its result.
func (s *Server) act(w http.ResponseWriter, r *http.Request, back string, do func(ctx context.Context, req admin.Request) (admin.Change, error)) {
	action, target := r.PathValue("action"), r.PathValue("id")
	d := resultData{Action: action, Target: target, Back: back}
	render := s.renderer(w, r, "result", "Result", func() any { return d })
	req, ok := s.formRequest(r, render)
	if !ok {
		return
	}
	if req.Expect == "" {
		render(http.StatusBadRequest, fmt.Errorf("%w: it carries no version: reload the page", errBadForm))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	ch, err := do(ctx, req)
	var ce *admin.ConflictError
	switch {
	case errors.As(err, &ce):
		d.Conflict, d.Now = ce, docOf(ce.Current)
		render(http.StatusConflict, err)
	case err != nil:
		render(statusOf(err), err)
	default:
		d.Change, d.Before, d.After = &ch, docOf(ch.Before), docOf(ch.After)
		render(http.StatusOK, nil)
	}
}

// docOf renders an object a change acted on as the CLI shows it (fields and
// tables, never raw JSON).
func docOf(v any) view.Doc {
	switch x := v.(type) {
	case admin.Saga:
		return view.Saga(x)[:1]
	case admin.ParkedEvent:
		return view.ParkedEvent(x)
	case admin.ParkedOutcome:
		return view.ParkedOutcome(x)
	case admin.Fence:
		return view.Fence(x)[:1]
	case admin.BulkChange:
		return view.Bulk(x)
	case nil:
		return view.Doc{{Fields: [][2]string{{"State", "gone: someone else acted on it since it was shown"}}}}
	}
	return view.Doc{{Fields: [][2]string{{"Value", fmt.Sprintf("%+v", v)}}}}
}

func (s *Server) sagaAction(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.act(w, r, "/sagas/"+id, func(ctx context.Context, req admin.Request) (admin.Change, error) {
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

// bulkData is the preview of a bulk change (step 1: its count, first objects
// and version, and the form that applies exactly that) or its result (step 2).
type bulkData struct {
	Change   admin.BulkChange
	Conflict *admin.ConflictError
	Action   string // requeue, discard, retry
	Noun     string
	Post     string // the apply form's action
	Back     string
	Fields   map[string][]string // the selection, carried to the apply form
	Doc      view.Doc
}

// bulkFields are the form fields that name a selection.
var bulkFields = []string{"id", "key", "topic", "type", "q", "state", "older", "all"}

// bulk previews (step "preview") or applies (step "apply") a bulk change of
// the outbox's parked events or of sagas, from the list pages' forms.
func (s *Server) bulk(w http.ResponseWriter, r *http.Request, kind string) {
	step := r.PathValue("step")
	d := bulkData{Action: r.PostFormValue("action"), Fields: map[string][]string{}}
	render := s.renderer(w, r, "bulk", "Bulk change", func() any { return d })
	req, ok := s.formRequest(r, render)
	if !ok {
		return
	}
	d.Action = r.PostFormValue("action")
	// "all" acts on every object the filter selects (the ticked rows aside);
	// otherwise on the ticked rows only (the filter aside).
	all := r.PostFormValue("all") == "1"
	for _, f := range bulkFields {
		if v := r.PostForm[f]; len(v) > 0 && !(len(v) == 1 && v[0] == "") && (f == "id") != all {
			d.Fields[f] = v
		}
	}
	ids := r.PostForm["id"]
	if all {
		ids = nil
	} else {
		for _, f := range bulkFields[1:] {
			r.PostForm.Del(f)
		}
	}
	var do func(ctx context.Context, req admin.Request) (admin.BulkChange, error)
	switch kind {
	case "outbox":
		d.Noun, d.Back, d.Post = "parked events", "/outbox", "/outbox/bulk/apply"
		sel := admin.ParkedSelection{IDs: ids, Filter: admin.ParkedFilter{Key: r.PostFormValue("key"), Topic: r.PostFormValue("topic"), Type: r.PostFormValue("type"), Search: r.PostFormValue("q")}}
		sel.All = all && sel.Filter.IsZero()
		do = func(ctx context.Context, req admin.Request) (admin.BulkChange, error) {
			return s.adm.ParkedBulk(ctx, d.Action, sel, req)
		}
	case "sagas":
		d.Noun, d.Back, d.Post = "sagas", "/sagas", "/sagas/bulk/apply"
		if d.Action != "retry" {
			render(http.StatusBadRequest, fmt.Errorf("%w: action %q", errBadForm, d.Action))
			return
		}
		sel := admin.SagaSelection{IDs: ids, Filter: admin.SagaFilter{States: r.PostForm["state"], Type: r.PostFormValue("type"), Search: r.PostFormValue("q")}}
		if o := r.PostFormValue("older"); o != "" {
			older, err := time.ParseDuration(o)
			if err != nil {
				render(http.StatusBadRequest, errors.Join(errBadForm, err))
				return
			}
			sel.Filter.OlderThan = older
		}
		f := sel.Filter
		sel.All = all && len(f.States) == 0 && f.Type == "" && f.Search == "" && f.OlderThan == 0
		do = func(ctx context.Context, req admin.Request) (admin.BulkChange, error) {
			return s.adm.SagaRetryBulk(ctx, sel, req)
		}
	default:
		http.NotFound(w, r)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	switch step {
	case "preview": // the count first: nothing changes, and the reason may come later
		req.DryRun, req.Expect = true, ""
		if req.Reason == "" {
			req.Reason = "preview"
		}
	case "apply":
		if req.Expect == "" {
			render(http.StatusBadRequest, fmt.Errorf("%w: a bulk change needs the version of its preview: preview it first", errBadForm))
			return
		}
	default:
		http.NotFound(w, r)
		return
	}
	ch, err := do(ctx, req)
	var ce *admin.ConflictError
	switch {
	case errors.As(err, &ce):
		d.Conflict = ce
		if now, ok := ce.Current.(admin.BulkChange); ok {
			d.Change = now
		}
		render(http.StatusConflict, err)
	case err != nil:
		render(statusOf(err), err)
	default:
		d.Change, d.Doc = ch, view.Bulk(ch)
		render(http.StatusOK, nil)
	}
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, http.StatusOK, "login", "layout", pageData{Page: "login", Title: "Log in", CSRF: s.csrfToken(w, r), Now: time.Now()})
}
