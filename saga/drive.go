package saga

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordkit/internal/pgtext"
)

// writeTimeout bounds a state write that must happen even while the runner stops.
const writeTimeout = 10 * time.Second

// drive runs a claimed saga forward (or backward) until it is terminal, waits for
// a retry, needs a human, or the claim is lost. Every change is one fenced write.
func (r *runner) drive(ctx context.Context, s *claimed) {
	c := r.c
	// The claim lasts ClaimTTL from the claim's commit; step calls stop a fifth
	// of it earlier so a slow step gives the claim up instead of overrunning it.
	deadline := time.Now().Add(c.cfg.ClaimTTL - c.cfg.ClaimTTL/5)
	for {
		if ctx.Err() != nil {
			r.release(ctx, s)
			return
		}
		def := c.def(s.typ)
		var err error
		var again bool
		switch {
		case def == nil || s.step > len(def.steps) || s.step < -1:
			err = r.stuck(ctx, s, fmt.Errorf("%w: saga type %q step %d not in this runner's definition", ErrUnknownType, s.typ, s.step))
		case s.state == StateRunning:
			again, err = r.forward(ctx, s, def, &deadline)
		case s.state == StateCompensating:
			again, err = r.backward(ctx, s, def, &deadline)
		default:
			r.release(ctx, s)
			return
		}
		if err != nil {
			if isFenced(err) {
				c.cfg.Logger.WarnContext(ctx, "saga: claim lost, write rejected; another runner owns the saga",
					"saga", s.id, "type", s.typ, "claim_version", s.version)
			} else if ctx.Err() == nil {
				c.cfg.Logger.ErrorContext(ctx, "saga: state write failed; the claim will expire and the step be retried",
					"saga", s.id, "type", s.typ, "err", err)
			}
			return
		}
		if !again {
			return
		}
	}
}

func (r *runner) at(p hookPoint, s *claimed) {
	if r.c.hook != nil {
		r.c.hook(p, s.id, s.step)
	}
}

func (r *runner) call(ctx context.Context, s *claimed, st erasedStep, fn call, comp bool, deadline time.Time) ([]byte, *stepState, error) {
	ss := &stepState{sagaID: s.id, sagaType: s.typ, step: st.name, attempt: s.attempts + 1,
		compensating: comp, outputs: s.outputs, maxBytes: r.c.cfg.MaxDataBytes}
	name := "saga.step " + st.name
	if comp {
		name = "saga.compensate " + st.name
	}
	ctx, span := r.c.tracer.Start(ctx, name, trace.WithAttributes(
		attribute.String(attrType, s.typ), attribute.String(attrStep, st.name),
		attribute.String(attrID, s.id), attribute.Int(attrAttempt, ss.attempt)))
	defer span.End()
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	data, err := fn(ctx, StepContext{ss}, s.data)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return data, ss, err
}

// forward runs the current step. It reports whether to continue driving.
func (r *runner) forward(ctx context.Context, s *claimed, def *erasedDef, deadline *time.Time) (bool, error) {
	c := r.c
	if s.step == len(def.steps) { // every step done, completion not recorded
		_, err := c.write(ctx, s, transition{state: StateCompleted, step: s.step, release: true})
		return false, err
	}
	st := def.steps[s.step]
	r.at(hookBeforeAction, s)
	data, ss, err := r.call(ctx, s, st, st.action, false, *deadline)
	if err == nil {
		r.at(hookAfterAction, s)
		next := s.step + 1
		t := transition{state: StateRunning, step: next, data: data, pivot: st.kind == KindPivot}
		if ss.output != nil {
			t.outKey, t.outValue = &st.name, ss.output
		}
		if next == len(def.steps) {
			t.state, t.release = StateCompleted, true
		}
		w, err := r.advance(ctx, s, t, deadline)
		if err != nil {
			return false, err
		}
		c.stats.steps.Add(1)
		c.metrics.steps.Add(ctx, 1, stepAttrs(s.typ, st.name, "ok"))
		r.at(hookAfterCommit, s)
		if ss.output != nil {
			s.outputs = withOutput(s.outputs, st.name, ss.output)
		}
		s.step, s.attempts, s.data, s.state = next, 0, data, t.state
		return r.chained(s, w, deadline) || t.state == StateRunning, nil
	}
	if ctx.Err() != nil { // the runner is stopping: not the step's fault
		r.release(ctx, s)
		return false, nil
	}
	if errors.Is(err, ErrBusiness) && s.step <= def.pivot {
		// Before (or at) the pivot: undo what was done, newest first. The failing
		// step itself is compensated too when it has a compensation: an earlier
		// attempt that timed out may have taken effect, and the barrier turns the
		// compensation of a step that never ran into a no-op.
		c.metrics.steps.Add(ctx, 1, stepAttrs(s.typ, st.name, "business_failure"))
		from := s.step
		if st.kind != KindCompensatable {
			from--
		}
		reason := pgtext.Clean(err.Error(), 4000)
		t := transition{state: StateCompensating, step: from, err: err, errStep: st.name, failure: &reason}
		if from < 0 {
			t.state, t.release = StateCompensated, true
		}
		if _, err := c.write(ctx, s, t); err != nil {
			return false, err
		}
		s.state, s.step, s.attempts = t.state, from, 0
		return t.state == StateCompensating, nil
	}
	// A technical failure, or any failure after the pivot: retry forward.
	outcome := "error"
	if errors.Is(err, ErrBusiness) {
		outcome = "business_failure_after_pivot"
		c.cfg.Logger.ErrorContext(ctx, "saga: business failure after the pivot; the runtime does not compensate past the pivot, retrying forward",
			"saga", s.id, "type", s.typ, "step", st.name, "err", err)
	}
	c.metrics.steps.Add(ctx, 1, stepAttrs(s.typ, st.name, outcome))
	return false, r.retry(ctx, s, st.name, StateRunning, err, s.step > def.pivot)
}

// retry records a failed attempt and schedules the next with full-jitter backoff.
func (r *runner) retry(ctx context.Context, s *claimed, step string, state State, cause error, pastPivot bool) error {
	c := r.c
	attempts := s.attempts + 1
	delay := c.cfg.Backoff.Delay(attempts - 1)
	t := transition{state: state, step: s.step, attempts: attempts, delay: delay, err: cause, errStep: step, release: true}
	if pastPivot {
		t.stuckAfter = &c.cfg.StuckAfter
	}
	w, err := c.write(ctx, s, t)
	if err != nil {
		return err
	}
	paged := w.paged
	c.stats.retries.Add(1)
	c.metrics.retries.Add(ctx, 1, stepAttrs(s.typ, step, string(state)))
	r.retryAt(time.Now().Add(delay))
	if paged {
		r.page(ctx, Page{SagaID: s.id, Type: s.typ, Step: step, Attempts: attempts, Reason: PageStuckAfterPivot, Err: cause})
	}
	return nil
}

// advance records t, the state after a step or compensation that succeeded,
// even while the runner stops (writeTimeout), and renews the claim's deadline.
// A transition that ends the saga chains to the next due one of r's types,
// unless ctx is done.
func (r *runner) advance(ctx context.Context, s *claimed, t transition, deadline *time.Time) (written, error) {
	if t.release && ctx.Err() == nil {
		t.chain = r.types
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	w, err := r.c.write(wctx, s, t)
	cancel()
	if err != nil {
		return w, err
	}
	*deadline = time.Now().Add(r.c.cfg.ClaimTTL - r.c.cfg.ClaimTTL/5)
	return w, nil
}

// backward runs the compensation of the current step.
func (r *runner) backward(ctx context.Context, s *claimed, def *erasedDef, deadline *time.Time) (bool, error) {
	c := r.c
	if s.step < 0 {
		_, err := c.write(ctx, s, transition{state: StateCompensated, step: -1, release: true})
		return false, err
	}
	st := def.steps[s.step]
	if s.step >= def.pivot || st.compensate == nil {
		// Unreachable by construction (and the table's CHECK forbids it): the
		// runtime never compensates on or after the pivot.
		return false, r.stuck(ctx, s, fmt.Errorf("saga: refusing to compensate step %q at or after the pivot", st.name))
	}
	r.at(hookBeforeCompensate, s)
	data, _, err := r.call(ctx, s, st, st.compensate, true, *deadline)
	if err == nil {
		r.at(hookAfterCompensate, s)
		next := s.step - 1
		t := transition{state: StateCompensating, step: next, data: data}
		if next < 0 {
			t.state, t.release = StateCompensated, true
		}
		w, err := r.advance(ctx, s, t, deadline)
		if err != nil {
			return false, err
		}
		c.stats.compensations.Add(1)
		c.metrics.steps.Add(ctx, 1, stepAttrs(s.typ, st.name, "compensated"))
		r.at(hookAfterCompCommit, s)
		s.step, s.attempts, s.data, s.state = next, 0, data, t.state
		return r.chained(s, w, deadline) || t.state == StateCompensating, nil
	}
	if ctx.Err() != nil {
		r.release(ctx, s)
		return false, nil
	}
	c.metrics.compFailures.Add(ctx, 1, stepAttrs(s.typ, st.name, "error"))
	c.metrics.steps.Add(ctx, 1, stepAttrs(s.typ, st.name, "compensation_error"))
	if s.attempts+1 < c.cfg.CompensationAttempts {
		return false, r.retry(ctx, s, st.name, StateCompensating, err, false)
	}
	attempts := s.attempts + 1
	if _, werr := c.write(ctx, s, transition{state: StateNeedsHuman, step: s.step, attempts: attempts,
		err: err, errStep: st.name, page: true, release: true}); werr != nil {
		return false, werr
	}
	r.page(ctx, Page{SagaID: s.id, Type: s.typ, Step: st.name, Attempts: attempts, Reason: PageCompensationFailed, Err: err})
	return false, nil
}

// chained switches the goroutine to the saga claimed in the same commit as the
// last write, if any, and reports whether there is one.
func (r *runner) chained(s *claimed, w written, deadline *time.Time) bool {
	if w.next == nil {
		return false
	}
	*s = *w.next
	*deadline = time.Now().Add(r.c.cfg.ClaimTTL - r.c.cfg.ClaimTTL/5)
	return true
}

// stuck parks a saga the runner cannot drive in needs_human and pages.
func (r *runner) stuck(ctx context.Context, s *claimed, cause error) error {
	if _, err := r.c.write(ctx, s, transition{state: StateNeedsHuman, step: s.step, attempts: s.attempts,
		err: cause, page: true, release: true}); err != nil {
		return err
	}
	r.page(ctx, Page{SagaID: s.id, Type: s.typ, Attempts: s.attempts, Reason: PageCannotDrive, Err: cause})
	return nil
}

func (r *runner) page(ctx context.Context, p Page) {
	c := r.c
	c.stats.pages.Add(1)
	c.cfg.Logger.ErrorContext(ctx, "saga: needs a human", "saga", p.SagaID, "type", p.Type, "step", p.Step,
		"attempts", p.Attempts, "reason", string(p.Reason), "err", p.Err)
	if c.cfg.OnPage != nil {
		c.cfg.OnPage(ctx, p)
	}
}

// release gives the claim up without recording an attempt (the runner is stopping).
func (r *runner) release(ctx context.Context, s *claimed) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	r.c.stats.commits.Add(1)
	if _, err := r.c.pool.Exec(wctx, r.c.q.release, s.id, s.version); err != nil {
		r.c.cfg.Logger.WarnContext(ctx, "saga: release claim", "saga", s.id, "err", err)
	}
}
