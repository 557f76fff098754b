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

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/audit"
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

// promVector runs an instant query and returns each sample's value by the
// label named (values rounded to integers).
func promVector(ctx context.Context, base, query, label string) (map[string]int64, error) {
	body, err := promQuery(ctx, base, query)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, r := range body.Data.Result {
		s, ok := r.Value[1].(string)
		if !ok {
			return nil, fmt.Errorf("coordctl: prometheus: unexpected sample %v", r.Value)
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("coordctl: prometheus: %w", err)
		}
		out[r.Metric[label]] += int64(v + 0.5)
	}
	return out, nil
}

// promResponse is an instant query's answer.
type promResponse struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

func promQuery(ctx context.Context, base, query string) (promResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var body promResponse
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query?query="+url.QueryEscape(query), nil)
	if err != nil {
		return body, fmt.Errorf("coordctl: prometheus: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return body, fmt.Errorf("coordctl: prometheus: %w", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return body, fmt.Errorf("coordctl: prometheus: %s: %w", resp.Status, err)
	}
	if body.Status != "success" {
		return body, fmt.Errorf("coordctl: prometheus: %s: %s", resp.Status, body.Error)
	}
	return body, nil
}

// promScalar runs an instant query whose result is one sample (or none: 0).
func promScalar(ctx context.Context, base, query string) (float64, error) {
	body, err := promQuery(ctx, base, query)
	if err != nil {
		return 0, err
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

// AuditFilter selects audit rows: by target and actor, a page at a time
// (Before: the last id shown).
type AuditFilter struct {
	Target, Actor string
	Before        int64
	Limit         int // default 50
}

// Audit lists coordctl's audit rows, newest first.
func (a *Admin) Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	if f.Limit < 0 || f.Limit > MaxPageSize || f.Before < 0 {
		return nil, &ArgError{Arg: "limit", Reason: "outside [1, 1000]"}
	}
	pool, err := a.db(ctx)
	if err != nil {
		return nil, err
	}
	return a.trail.List(ctx, pool, audit.ListOpts{Target: f.Target, Actor: f.Actor, Before: f.Before, Limit: f.Limit})
}

// Grant runs the audit table's grant statements (Trail.GrantsSQL) in one
// transaction.
func (a *Admin) Grant(ctx context.Context, stmts []string) error {
	pool, err := a.db(ctx)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return fmt.Errorf("coordctl: %s: %w", s, err)
			}
		}
		return nil
	})
}

// Migrate creates or upgrades coordctl's audit table.
func (a *Admin) Migrate(ctx context.Context) error {
	pool, err := a.db(ctx)
	if err != nil {
		return err
	}
	return a.trail.Migrate(ctx, pool)
}
