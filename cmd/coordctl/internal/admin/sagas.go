package admin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/saga"
)

// Saga is one saga with its step timeline.
type Saga struct {
	ID            string     `json:"id"`
	Type          string     `json:"type"`
	State         string     `json:"state"`
	Step          int        `json:"step"`
	StepName      string     `json:"step_name"`
	StepCount     int        `json:"step_count"`
	PivotStep     int        `json:"pivot_step"`
	Attempts      int        `json:"attempts"` // failed attempts of the current step or compensation
	NextAttemptAt time.Time  `json:"next_attempt_at"`
	LastError     string     `json:"last_error"`
	Failure       string     `json:"failure"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
	StateSince    time.Time  `json:"state_since"`
	AgeSeconds    float64    `json:"age_seconds"` // in its current state
	PivotAt       *time.Time `json:"pivot_at"`
	ClaimOwner    string     `json:"claim_owner"`
	// Version identifies this state (state, step, attempts, last write): pass it
	// as --expect, or the console's form does, so that a retry, resolve or cancel
	// acts only on the state shown.
	Version string          `json:"version"`
	Steps   []SagaStep      `json:"steps,omitempty"`
	Errors  []SagaError     `json:"errors,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	// Outputs are the steps' recorded outputs, by step name.
	Outputs map[string]json.RawMessage `json:"outputs,omitempty"`
}

// SagaStep is one step of the timeline.
type SagaStep struct {
	Index int    `json:"index"`
	Name  string `json:"name"` // "" when the saga predates recorded step names
	Kind  string `json:"kind"` // compensatable, pivot, retriable
	// Status: done, current, pending, compensated (undone), compensating (being
	// undone), failed (the step whose business failure started compensation),
	// not run (after it), stuck (the compensation a human must resolve).
	Status      string     `json:"status"`
	Failures    int        `json:"failures"` // errors recorded for it (the history keeps the last 20)
	LastError   string     `json:"last_error"`
	LastErrorAt *time.Time `json:"last_error_at"` // when LastError was recorded
}

// SagaError is one error in the saga's history.
type SagaError struct {
	At    time.Time `json:"at"`
	Step  string    `json:"step"`
	Error string    `json:"error"`
}

// SagaFilter selects sagas: by type, states and age, by a search (an id
// prefix or text of the last error), a page at a time.
type SagaFilter struct {
	Type      string
	States    []string
	OlderThan time.Duration
	Search    string
	After     string // the previous page's Next
	Limit     int
}

// Sagas lists sagas, oldest in their state first.
func (a *Admin) Sagas(ctx context.Context, f SagaFilter) ([]Saga, error) {
	c, _, err := a.sagas(ctx)
	if err != nil {
		return nil, err
	}
	res, err := c.SagaList(ctx, f.opts())
	if err != nil {
		return nil, err
	}
	infos := res.Sagas
	out := make([]Saga, 0, len(infos))
	for _, i := range infos {
		out = append(out, a.sagaOf(i, false))
	}
	return out, nil
}

// Saga returns one saga with its timeline, error history and data.
func (a *Admin) Saga(ctx context.Context, id string) (Saga, error) {
	if err := checkID("saga id", id); err != nil {
		return Saga{}, err
	}
	c, _, err := a.sagas(ctx)
	if err != nil {
		return Saga{}, err
	}
	i, err := c.SagaGet(ctx, id)
	if err != nil {
		return Saga{}, err
	}
	return a.sagaOf(i, true), nil
}

func (a *Admin) sagaOf(i saga.Info, detail bool) Saga {
	s := Saga{ID: i.ID, Type: i.Type, State: string(i.State), Step: i.Step, StepCount: i.StepCount, PivotStep: i.PivotStep,
		Attempts: i.Attempts, NextAttemptAt: i.NextAttemptAt, LastError: i.LastError, Failure: i.Failure,
		CreatedAt: i.CreatedAt, UpdatedAt: i.UpdatedAt, StateSince: i.StateSince, AgeSeconds: seconds(i.Age(a.cfg.Now())),
		PivotAt: i.PivotAt, Version: sagaVersion(i)}
	if i.ClaimOwner != nil {
		s.ClaimOwner = *i.ClaimOwner
	}
	if i.Step >= 0 && i.Step < len(i.StepNames) {
		s.StepName = i.StepNames[i.Step]
	}
	if detail {
		s.Steps = timeline(i)
		for _, e := range i.Errors {
			s.Errors = append(s.Errors, SagaError(e))
		}
		s.Data, s.Outputs = i.Data, i.Outputs
	}
	return s
}

// sagaVersion identifies what an operator decides on: state, position,
// attempts and the time of the last write.
func sagaVersion(i saga.Info) string {
	return version(string(i.State), strconv.Itoa(i.Step), strconv.Itoa(i.Attempts), strconv.FormatInt(i.UpdatedAt.UnixMicro(), 10))
}

// version is a short digest of the parts of a state.
func version(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:6])
}

// timeline derives each step's status from the saga's position and state, and
// its failures from the error history.
func timeline(i saga.Info) []SagaStep {
	steps := make([]SagaStep, i.StepCount)
	byName := map[string]int{}
	failed := -1 // the step whose business failure started compensation, if known
	cancelled := strings.HasPrefix(i.Failure, "cancelled: ")
	for n := range steps {
		st := &steps[n]
		st.Index = n
		if n < len(i.StepNames) {
			st.Name = i.StepNames[n]
			byName[st.Name] = n
		}
		switch {
		case n < i.PivotStep:
			st.Kind = "compensatable"
		case n == i.PivotStep:
			st.Kind = "pivot"
		default:
			st.Kind = "retriable"
		}
	}
	for _, e := range i.Errors {
		if e.Step == "" && strings.HasPrefix(e.Error, "cancelled: ") {
			cancelled = true
		}
		if n, ok := byName[e.Step]; ok && e.Step != "" {
			steps[n].Failures++
			steps[n].LastError = e.Error
			at := e.At
			steps[n].LastErrorAt = &at
			if e.Error == i.Failure {
				failed = n
			}
		}
	}
	compensation := i.State == saga.StateCompensating || i.State == saga.StateNeedsHuman || i.State == saga.StateCompensated
	if failed < 0 && !cancelled && compensation {
		// A resolution replaced the failure's text: the step that failed is the
		// last one before the pivot with a recorded error (the steps after it
		// never ran; the compensations of those before it record theirs lower).
		for n := min(i.PivotStep, len(steps)) - 1; n >= 0; n-- {
			if steps[n].Failures > 0 {
				failed = n
				break
			}
		}
	}
	for n := range steps {
		steps[n].Status = stepStatus(i, n, failed)
	}
	return steps
}

// stepStatus is step n's status; failed is the step whose business failure
// started compensation (-1: unknown, e.g. a cancel).
func stepStatus(i saga.Info, n, failed int) string {
	switch i.State {
	case saga.StateCompleted:
		return "done"
	case saga.StateRunning:
		switch {
		case n < i.Step:
			return "done"
		case n == i.Step:
			return "current"
		}
		return "pending"
	case saga.StateCompensating, saga.StateNeedsHuman, saga.StateCompensated:
		// A saga compensates only before its pivot: the pivot and the steps
		// after it never ran. i.Step is the next step to undo (-1 once every
		// step is undone): steps before it are still done, steps after it were
		// undone — except the failed step and those after it, which never took
		// effect.
		step := i.Step
		if i.State == saga.StateCompensated {
			step = -1
		}
		switch {
		case n >= i.PivotStep && i.PivotAt == nil:
			return "not run"
		case failed >= 0 && n == failed:
			return "failed"
		case failed >= 0 && n > failed:
			return "not run"
		case n < step:
			return "done"
		case n == step && i.State == saga.StateNeedsHuman:
			return "stuck"
		case n == step:
			return "compensating"
		}
		return "compensated"
	}
	return "unknown"
}

// SagaRetry makes a running or compensating saga due now.
func (a *Admin) SagaRetry(ctx context.Context, id string, req Request) (Change, error) {
	return a.sagaMutation(ctx, "saga.retry", id, req, func(ctx context.Context, c *saga.Client, tx pgx.Tx) error {
		return c.SagaRetryTx(ctx, tx, id)
	})
}

// SagaResolve takes a needs_human saga out of that state (how: compensated,
// retry, skip); the reason is also the saga's resolution note.
func (a *Admin) SagaResolve(ctx context.Context, id string, how saga.Resolution, req Request) (Change, error) {
	return a.sagaMutation(ctx, "saga.resolve."+string(how), id, req, func(ctx context.Context, c *saga.Client, tx pgx.Tx) error {
		return c.SagaResolveTx(ctx, tx, id, how, req.Actor+": "+req.Reason)
	})
}

// SagaCancel stops a running saga before its pivot and compensates it.
func (a *Admin) SagaCancel(ctx context.Context, id string, req Request) (Change, error) {
	return a.sagaMutation(ctx, "saga.cancel", id, req, func(ctx context.Context, c *saga.Client, tx pgx.Tx) error {
		return c.SagaCancelTx(ctx, tx, id, req.Actor+": "+req.Reason)
	})
}

func (a *Admin) sagaMutation(ctx context.Context, action, id string, req Request,
	apply func(context.Context, *saga.Client, pgx.Tx) error) (Change, error) {
	if err := checkID("saga id", id); err != nil {
		return Change{}, err
	}
	c, _, err := a.sagas(ctx)
	if err != nil {
		return Change{}, err
	}
	read := func(ctx context.Context, tx pgx.Tx) (Saga, string, error) {
		i, err := c.SagaLockTx(ctx, tx, id)
		if err != nil {
			return Saga{}, "", err
		}
		s := a.sagaOf(i, true)
		s.Data, s.Outputs = nil, nil // the audit row keeps the decision, not the business data
		return s, s.Version, nil
	}
	return a.mutate(ctx, op{
		action: action, target: id,
		lock: func(ctx context.Context, tx pgx.Tx) (any, string, error) { return read(ctx, tx) },
		gone: func(err error) bool { return errors.Is(err, saga.ErrNotFound) },
		apply: func(ctx context.Context, tx pgx.Tx, _ any) error {
			if err := apply(ctx, c, tx); err != nil {
				return fmt.Errorf("%s: %w", action, err)
			}
			return nil
		},
		after: func(ctx context.Context, tx pgx.Tx) (any, error) { s, _, err := read(ctx, tx); return s, err },
	}, req)
}

// SagaSummary is the overview's count of non-terminal sagas.
type SagaSummary struct {
	Type             string    `json:"type"`
	State            string    `json:"state"`
	Count            int64     `json:"count"`
	OldestSince      time.Time `json:"oldest_since"`
	OldestAgeSeconds float64   `json:"oldest_age_seconds"`
}

// SagaSummaries counts the non-terminal sagas by type and state.
func (a *Admin) SagaSummaries(ctx context.Context) ([]SagaSummary, error) {
	c, _, err := a.sagas(ctx)
	if err != nil {
		return nil, err
	}
	counts, err := c.SagaCount(ctx, &saga.SagaListOpts{States: []saga.State{saga.StateRunning, saga.StateCompensating, saga.StateNeedsHuman}})
	if err != nil {
		return nil, err
	}
	out := make([]SagaSummary, 0, len(counts))
	for _, s := range counts {
		out = append(out, SagaSummary{Type: s.Type, State: string(s.State), Count: s.Count, OldestSince: s.OldestSince,
			OldestAgeSeconds: seconds(a.cfg.Now().Sub(s.OldestSince))})
	}
	return out, nil
}
