package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Overview is the console's first page and `coordctl overview`.
type Overview struct {
	At            time.Time `json:"at"`
	LeasesHeld    int       `json:"leases_held"`
	LeasesWaiting int       `json:"leases_waiting"` // keys queued behind holders
	// Members is how many instances are registered (package membership), in
	// Services services over every tenant.
	Members  int `json:"members"`
	Services int `json:"services"`
	// FenceRejectionsLastHour is sum(increase(coordkit_pgfence_rejected_total[1h]))
	// from Prometheus; nil when no Prometheus is configured or it failed
	// (FenceRejectionsSource says which).
	FenceRejectionsLastHour *float64      `json:"fence_rejections_last_hour"`
	FenceRejectionsSource   string        `json:"fence_rejections_source"`
	Outbox                  *OutboxStatus `json:"outbox"`
	Sagas                   []SagaSummary `json:"sagas"`
	NeedsHuman              int64         `json:"needs_human"`
	// Errors says which part could not be read (the others are still shown).
	Errors map[string]string `json:"errors,omitempty"`
}

// FenceRejectionsQuery is the PromQL of the overview's fence rejections.
const FenceRejectionsQuery = `sum(increase(coordkit_pgfence_rejected_total[1h]))`

// Overview reads every part it can; a part that fails is named in Errors.
func (a *Admin) Overview(ctx context.Context) Overview {
	o := Overview{At: a.cfg.Now(), Sagas: []SagaSummary{}, Errors: map[string]string{}}
	fail := func(part string, err error) { o.Errors[part] = err.Error() }
	if leases, err := a.Leases(ctx, ""); err != nil {
		fail("leases", err)
	} else {
		for _, l := range leases {
			if l.Held {
				o.LeasesHeld++
			}
			o.LeasesWaiting += l.Waiters
		}
	}
	if ss, err := a.Members(ctx, "", ""); err != nil {
		fail("members", err)
	} else {
		o.Services = len(ss)
		for _, s := range ss {
			o.Members += len(s.Members)
		}
	}
	if st, err := a.OutboxStatus(ctx); err != nil {
		fail("outbox", err)
	} else {
		o.Outbox = &st
	}
	if sums, err := a.SagaSummaries(ctx); err != nil {
		fail("sagas", err)
	} else {
		o.Sagas = sums
		for _, s := range sums {
			if s.State == "needs_human" {
				o.NeedsHuman += s.Count
			}
		}
	}
	o.FenceRejectionsSource = "not configured (--prometheus)"
	if a.cfg.Prometheus != "" {
		o.FenceRejectionsSource = a.cfg.Prometheus
		if v, err := promScalar(ctx, a.cfg.Prometheus, FenceRejectionsQuery); err != nil {
			fail("fence_rejections", err)
		} else {
			o.FenceRejectionsLastHour = &v
		}
	}
	if len(o.Errors) == 0 {
		o.Errors = nil
	}
	return o
}

// promScalar runs an instant query whose result is one sample (or none: 0).
func promScalar(ctx context.Context, base, query string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query?query="+url.QueryEscape(query), nil)
	if err != nil {
		return 0, fmt.Errorf("coordctl: prometheus: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("coordctl: prometheus: %w", err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, fmt.Errorf("coordctl: prometheus: %s: %w", resp.Status, err)
	}
	if body.Status != "success" {
		return 0, fmt.Errorf("coordctl: prometheus: %s: %s", resp.Status, body.Error)
	}
	if len(body.Data.Result) == 0 {
		return 0, nil // no series: nothing was rejected (or nothing is scraped)
	}
	s, ok := body.Data.Result[0].Value[1].(string)
	if !ok {
		return 0, fmt.Errorf("coordctl: prometheus: unexpected sample %v", body.Data.Result[0].Value)
	}
	return strconv.ParseFloat(s, 64)
}

// Audit lists coordctl's audit rows, newest first (target "" = all).
func (a *Admin) Audit(ctx context.Context, target string, limit int) ([]AuditEntry, error) {
	pool, err := a.db(ctx)
	if err != nil {
		return nil, err
	}
	return a.trail.List(ctx, pool, auditOpts(target, limit))
}

// Migrate creates or upgrades coordctl's audit table.
func (a *Admin) Migrate(ctx context.Context) error {
	pool, err := a.db(ctx)
	if err != nil {
		return err
	}
	return a.trail.Migrate(ctx, pool)
}
