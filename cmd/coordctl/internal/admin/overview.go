package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Overview is the console's first page and `coordctl overview`. A figure that
// could not be read is nil (JSON null, shown as "unknown"), never zero, and its
// part is named in Errors with the cause.
type Overview struct {
	At            time.Time `json:"at"`
	LeasesHeld    *int      `json:"leases_held"`
	LeasesWaiting *int      `json:"leases_waiting"` // keys queued behind holders
	// Members is how many instances are registered (package membership), in
	// Services services over every tenant.
	Members  *int `json:"members"`
	Services *int `json:"services"`
	// FenceRejectionsLastHour is sum(increase(coordkit_pgfence_rejected_total[1h]))
	// from Prometheus; nil when no Prometheus is configured or it failed
	// (FenceRejectionsSource says which).
	FenceRejectionsLastHour *float64      `json:"fence_rejections_last_hour"`
	FenceRejectionsSource   string        `json:"fence_rejections_source"`
	Outbox                  *OutboxStatus `json:"outbox"`
	// Sagas are the non-terminal sagas by type and state; nil when unknown.
	Sagas      []SagaSummary `json:"sagas"`
	NeedsHuman *int64        `json:"needs_human"`
	// Errors says which part could not be read (the others are still shown).
	Errors map[string]string `json:"errors,omitempty"`
}

// FenceRejectionsQuery is the PromQL of the overview's fence rejections.
const FenceRejectionsQuery = `sum(increase(coordkit_pgfence_rejected_total[1h]))`

// Overview reads every part at once, each bounded by Config.PartTimeout; a part
// that fails is named in Errors, its figures left unknown (nil), and the error
// returned is a *PartialError naming them (nil when every part was read).
func (a *Admin) Overview(ctx context.Context) (Overview, error) {
	o := Overview{At: a.cfg.Now(), Errors: map[string]string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	part := func(name string, read func(ctx context.Context) error) {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, a.cfg.PartTimeout)
			defer cancel()
			if err := read(pctx); err != nil {
				if pctx.Err() != nil && ctx.Err() == nil {
					err = fmt.Errorf("no answer within %v: %w", a.cfg.PartTimeout, err)
				}
				mu.Lock()
				o.Errors[name] = err.Error()
				mu.Unlock()
			}
		})
	}
	part("leases", func(ctx context.Context) error {
		leases, err := a.leaseStates(ctx, "")
		if err != nil {
			return err
		}
		held, waiting := 0, 0
		for _, l := range leases {
			if l.Held {
				held++
			}
			waiting += l.Waiters
		}
		mu.Lock()
		o.LeasesHeld, o.LeasesWaiting = &held, &waiting
		mu.Unlock()
		return nil
	})
	part("members", func(ctx context.Context) error {
		ss, err := a.Members(ctx, "", "")
		if err != nil {
			return err
		}
		members, services := 0, len(ss)
		for _, s := range ss {
			members += len(s.Members)
		}
		mu.Lock()
		o.Members, o.Services = &members, &services
		mu.Unlock()
		return nil
	})
	part("outbox", func(ctx context.Context) error {
		st, err := a.OutboxStatus(ctx)
		if err != nil {
			return err
		}
		mu.Lock()
		o.Outbox = &st
		mu.Unlock()
		return nil
	})
	part("sagas", func(ctx context.Context) error {
		sums, err := a.SagaSummaries(ctx)
		if err != nil {
			return err
		}
		var n int64
		for _, s := range sums {
			if s.State == "needs_human" {
				n += s.Count
			}
		}
		mu.Lock()
		o.Sagas, o.NeedsHuman = sums, &n
		mu.Unlock()
		return nil
	})
	o.FenceRejectionsSource = "not configured (--prometheus)"
	if a.cfg.Prometheus != "" {
		o.FenceRejectionsSource = a.cfg.Prometheus
		part("fence_rejections", func(ctx context.Context) error {
			v, err := promScalar(ctx, a.cfg.Prometheus, FenceRejectionsQuery)
			if err != nil {
				return err
			}
			mu.Lock()
			o.FenceRejectionsLastHour = &v
			mu.Unlock()
			return nil
		})
	}
	wg.Wait()
	err := partial(o.Errors)
	if len(o.Errors) == 0 {
		o.Errors = nil
	}
	return o, err
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
