package coordkit_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/efficiencylock"
	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/idempotency/grpcidem"
	"github.com/coordkit/coordkit/idempotency/httpidem"
	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/membership/grpcresolver"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/outbox/natsjs"
	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/saga"
	"github.com/coordkit/coordkit/schedule"
	"github.com/coordkit/coordkit/testing/fencetest"
	"github.com/coordkit/coordkit/testing/publishtest"
)

// exportedError is one exported error of one package, as a caller meets it.
type exportedError struct {
	name      string // "pkg.ErrX" or "*pkg.XError", as declared
	err       error
	retryable bool // what the package documents: retrying the operation can succeed
}

// exportedErrors lists every exported error of every SDK package (sentinels and
// typed errors) with the retry answer its documentation gives.
// TestEveryExportedErrorIsListed keeps it complete.
var exportedErrors = []exportedError{
	{"coord.ErrStaleToken", coord.ErrStaleToken, false},
	{"coord.ErrAuthorityLost", coord.ErrAuthorityLost, false},
	{"coord.ErrNoLeader", coord.ErrNoLeader, true},
	{"coord.ErrQuotaExceeded", coord.ErrQuotaExceeded, false},
	{"coord.ErrCompacted", coord.ErrCompacted, true},
	{"coord.ErrInvalidName", coord.ErrInvalidName, false},
	{"coord.ErrInvalidToken", coord.ErrInvalidToken, false},
	{"*coord.StaleTokenError", &coord.StaleTokenError{}, false},
	{"*coord.AuthorityLostError", &coord.AuthorityLostError{Reason: coord.LossRenewalDeadline, Err: errors.New("keepalive timed out")}, false},
	{"*coord.QuotaError", &coord.QuotaError{Tenant: "t", Quota: "value_bytes"}, false},
	{"*coord.NameError", &coord.NameError{Field: "name"}, false},
	{"coord.ErrSchemaMismatch", coord.ErrSchemaMismatch, false},
	{"*coord.SchemaMismatchError", &coord.SchemaMismatchError{Component: "outbox", Table: `"coord_outbox"`, Differences: []string{`table "coord_outbox" is missing`}}, false},

	{"correctnesslease.ErrHeld", correctnesslease.ErrHeld, true},
	{"correctnesslease.ErrAlreadyQueued", correctnesslease.ErrAlreadyQueued, false},
	{"correctnesslease.ErrInvalidConfig", correctnesslease.ErrInvalidConfig, false},
	{"correctnesslease.ErrDrainExceeded", correctnesslease.ErrDrainExceeded, false},
	{"correctnesslease.ErrNotFound", correctnesslease.ErrNotFound, false},
	{"*correctnesslease.ConfigError", &correctnesslease.ConfigError{Field: "TTL"}, false},

	{"pgfence.ErrZeroToken", pgfence.ErrZeroToken, false},
	{"pgfence.ErrInvalidConfig", pgfence.ErrInvalidConfig, false},
	{"pgfence.ErrRowNotFound", pgfence.ErrRowNotFound, false},
	{"pgfence.ErrNotFound", pgfence.ErrNotFound, false},
	{"*pgfence.ConfigError", &pgfence.ConfigError{Field: "Table"}, false},
	{"pgfence.ErrBusy", pgfence.ErrBusy, true},
	{"*pgfence.BusyError", &pgfence.BusyError{Err: errors.New("lock timeout")}, true},
	{"pgfence.ErrIdleTimeout", pgfence.ErrIdleTimeout, true},
	{"*pgfence.IdleError", &pgfence.IdleError{Err: errors.New("idle timeout")}, true},
	{"pgfence.ErrCommitUnknown", pgfence.ErrCommitUnknown, false}, // resolve by the effect, not by a blind retry
	{"pgfence.ErrResetConflict", pgfence.ErrResetConflict, false},
	{"*pgfence.ResetConflictError", &pgfence.ResetConflictError{}, false},

	{"efficiencylock.ErrNotAcquired", efficiencylock.ErrNotAcquired, true},
	{"efficiencylock.ErrLockLost", efficiencylock.ErrLockLost, false},
	{"efficiencylock.ErrNotHeld", efficiencylock.ErrNotHeld, false},
	{"efficiencylock.ErrReleased", efficiencylock.ErrReleased, false},
	{"efficiencylock.ErrInvalidTTL", efficiencylock.ErrInvalidTTL, false},
	{"efficiencylock.ErrInvalidReason", efficiencylock.ErrInvalidReason, false},
	{"efficiencylock.ErrInvalidConfig", efficiencylock.ErrInvalidConfig, false},
	{"*efficiencylock.NotAcquiredError", &efficiencylock.NotAcquiredError{Name: "n", Attempts: 1}, true},
	{"*efficiencylock.LostError", &efficiencylock.LostError{Name: "n", Reason: efficiencylock.LossGone}, false},
	{"*efficiencylock.NotHeldError", &efficiencylock.NotHeldError{Op: "release", Name: "n"}, false},
	{"*efficiencylock.TTLError", &efficiencylock.TTLError{}, false},
	{"*efficiencylock.ReasonError", &efficiencylock.ReasonError{}, false},
	{"*efficiencylock.ConfigError", &efficiencylock.ConfigError{Field: "Tenant"}, false},

	{"failstatic.ErrStale", failstatic.ErrStale, true},
	{"failstatic.ErrNoSnapshot", failstatic.ErrNoSnapshot, true},
	{"failstatic.ErrCorruptState", failstatic.ErrCorruptState, false},
	{"failstatic.ErrRejected", failstatic.ErrRejected, false},
	{"failstatic.ErrNotFound", failstatic.ErrNotFound, false},
	{"failstatic.ErrInvalidConfig", failstatic.ErrInvalidConfig, false},
	{"*failstatic.StaleError", &failstatic.StaleError{Class: "c"}, true},
	{"*failstatic.StateFileError", &failstatic.StateFileError{Path: "p", Reason: "magic"}, false},
	{"*failstatic.RejectedError", &failstatic.RejectedError{Stage: "decode", Err: errors.New("bad")}, false},
	{"*failstatic.ConfigError", &failstatic.ConfigError{Field: "Key"}, false},

	{"idempotency.ErrMismatch", idempotency.ErrMismatch, false},
	{"idempotency.ErrInFlight", idempotency.ErrInFlight, true},
	{"idempotency.ErrInvalidKey", idempotency.ErrInvalidKey, false},
	{"idempotency.ErrInvalidBody", idempotency.ErrInvalidBody, false},
	{"idempotency.ErrResponseTooLarge", idempotency.ErrResponseTooLarge, false},
	{"idempotency.ErrCommitUnknown", idempotency.ErrCommitUnknown, true},
	{"idempotency.ErrLockLost", idempotency.ErrLockLost, false},
	{"idempotency.ErrInvalidOperation", idempotency.ErrInvalidOperation, false},
	{"idempotency.ErrInvalidConfig", idempotency.ErrInvalidConfig, false},
	{"idempotency.ErrNotFound", idempotency.ErrNotFound, false},
	{"*idempotency.MismatchError", &idempotency.MismatchError{}, false},
	{"*idempotency.InFlightError", &idempotency.InFlightError{}, true},
	{"*idempotency.KeyError", &idempotency.KeyError{Field: "key"}, false},
	{"*idempotency.ConfigError", &idempotency.ConfigError{Field: "Table"}, false},
	{"httpidem.ErrMissingKey", httpidem.ErrMissingKey, false},
	{"httpidem.ErrInvalidConfig", httpidem.ErrInvalidConfig, false},
	{"*httpidem.ConfigError", &httpidem.ConfigError{Field: "Scope"}, false},
	{"grpcidem.ErrInvalidConfig", grpcidem.ErrInvalidConfig, false},
	{"*grpcidem.ConfigError", &grpcidem.ConfigError{Field: "Scope"}, false},

	{"outbox.ErrInvalidEvent", outbox.ErrInvalidEvent, false},
	{"outbox.ErrEmptyField", outbox.ErrEmptyField, false},
	{"outbox.ErrFieldTooLong", outbox.ErrFieldTooLong, false},
	{"outbox.ErrInvalidUTF8", outbox.ErrInvalidUTF8, false},
	{"outbox.ErrInvalidJSON", outbox.ErrInvalidJSON, false},
	{"outbox.ErrPayloadTooLarge", outbox.ErrPayloadTooLarge, false},
	{"outbox.ErrInvalidID", outbox.ErrInvalidID, false},
	{"outbox.ErrInvalidConfig", outbox.ErrInvalidConfig, false},
	//lint:ignore SA1019 every exported error is listed, the deprecated ones too
	{"outbox.ErrNotParked", outbox.ErrNotParked, false},
	{"outbox.ErrNotFound", outbox.ErrNotFound, false},
	{"outbox.ErrSkipped", outbox.ErrSkipped, true},
	{"*outbox.EventError", &outbox.EventError{Field: "payload", Err: outbox.ErrInvalidUTF8}, false},
	{"*outbox.ConfigError", &outbox.ConfigError{Field: "Table"}, false},
	{"outbox.ErrNoDestination", outbox.ErrNoDestination, false},
	{"outbox.ErrMissingEventID", outbox.ErrMissingEventID, false},
	{"*outbox.HandlerError", &outbox.HandlerError{Err: errors.New("handler")}, false},
	{"natsjs.ErrUnsuitableConsumer", natsjs.ErrUnsuitableConsumer, false},

	{"saga.ErrNoPivot", saga.ErrNoPivot, false},
	{"saga.ErrTwoPivots", saga.ErrTwoPivots, false},
	{"saga.ErrNoCompensation", saga.ErrNoCompensation, false},
	{"saga.ErrCompensationAfterPivot", saga.ErrCompensationAfterPivot, false},
	{"saga.ErrInvalidDefinition", saga.ErrInvalidDefinition, false},
	{"saga.ErrBusiness", saga.ErrBusiness, false},
	{"saga.ErrNotFound", saga.ErrNotFound, false},
	{"saga.ErrAlreadyStarted", saga.ErrAlreadyStarted, false},
	{"saga.ErrPastPivot", saga.ErrPastPivot, false},
	{"saga.ErrWrongState", saga.ErrWrongState, false},
	{"saga.ErrTooLarge", saga.ErrTooLarge, false},
	{"saga.ErrInvalidData", saga.ErrInvalidData, false},
	{"saga.ErrInvalidConfig", saga.ErrInvalidConfig, false},
	{"saga.ErrUnknownType", saga.ErrUnknownType, false},
	{"saga.ErrNoOutput", saga.ErrNoOutput, false},
	{"saga.ErrClaimLost", saga.ErrClaimLost, false},
	{"saga.ErrBarrierKey", saga.ErrBarrierKey, false},
	{"*saga.DefinitionError", &saga.DefinitionError{Saga: "s", Err: saga.ErrNoPivot}, false},
	{"*saga.AlreadyStartedError", &saga.AlreadyStartedError{}, false},
	{"*saga.StateError", &saga.StateError{}, false},
	{"*saga.ConfigError", &saga.ConfigError{Field: "Table"}, false},

	{"membership.ErrInvalidConfig", membership.ErrInvalidConfig, false},
	{"membership.ErrNotRegistered", membership.ErrNotRegistered, false}, // the metadata is kept for the re-registration
	{"membership.ErrClosed", membership.ErrClosed, false},
	{"membership.ErrNotFound", membership.ErrNotFound, false},
	{"*membership.ConfigError", &membership.ConfigError{Field: "TTL"}, false},
	{"grpcresolver.ErrInvalidConfig", grpcresolver.ErrInvalidConfig, false},
	{"*grpcresolver.ConfigError", &grpcresolver.ConfigError{Field: "target"}, false},

	{"ownership.ErrInvalidConfig", ownership.ErrInvalidConfig, false},
	{"ownership.ErrClosed", ownership.ErrClosed, false},               // Join again on a new session
	{"ownership.ErrAlreadyJoined", ownership.ErrAlreadyJoined, false}, // a session joins a group once
	{"ownership.ErrNotFound", ownership.ErrNotFound, false},
	{"*ownership.ConfigError", &ownership.ConfigError{Field: "Partitions"}, false},
	{"*ownership.RevokedError", &ownership.RevokedError{Reason: ownership.ReasonRebalance}, false}, // a context cause: the partition moved

	{"schedule.ErrInvalidConfig", schedule.ErrInvalidConfig, false},
	{"schedule.ErrInvalidJob", schedule.ErrInvalidJob, false},
	{"schedule.ErrUnknownJob", schedule.ErrUnknownJob, false},
	{"schedule.ErrNotFound", schedule.ErrNotFound, false},
	{"schedule.ErrStarted", schedule.ErrStarted, false},
	{"schedule.ErrStopped", schedule.ErrStopped, false}, // Run again on a new session
	{"*schedule.ConfigError", &schedule.ConfigError{Field: "Tenant"}, false},
	{"*schedule.JobError", &schedule.JobError{Job: "j", Field: "Cron"}, false},

	{"fencetest.ErrInvalidConfig", fencetest.ErrInvalidConfig, false},
	{"*fencetest.ConfigError", &fencetest.ConfigError{Field: "Endpoints"}, false},
	{"publishtest.ErrInvalidConfig", publishtest.ErrInvalidConfig, false},
	{"*publishtest.ConfigError", &publishtest.ConfigError{Field: "Topic"}, false},
}

// TestRetryableOverEveryExportedError: coord.Retryable gives every exported error
// the answer its package documents — bare, wrapped by a caller, and never once the
// caller's context has ended.
func TestRetryableOverEveryExportedError(t *testing.T) {
	for _, e := range exportedErrors {
		wrapped := fmt.Errorf("caller: %w", e.err)
		if got := coord.Retryable(e.err); got != e.retryable {
			t.Errorf("coord.Retryable(%s) = %v, want %v", e.name, got, e.retryable)
		}
		if got := coord.Retryable(wrapped); got != e.retryable {
			t.Errorf("coord.Retryable(wrapped %s) = %v, want %v", e.name, got, e.retryable)
		}
		if coord.Retryable(errors.Join(e.err, context.Canceled)) {
			t.Errorf("coord.Retryable(%s joined with context.Canceled) = true", e.name)
		}
	}
}

// TestErrorMessagesDoNotStutter: every exported error's message names its
// package once, at the start ("pgfence: no row matches the key"), never
// "pkg: pkg: …".
func TestErrorMessagesDoNotStutter(t *testing.T) {
	for _, e := range exportedErrors {
		pkg := strings.TrimPrefix(e.name, "*")
		pkg = pkg[:strings.Index(pkg, ".")]
		msg := e.err.Error()
		if !strings.HasPrefix(msg, pkg+": ") && !(pkg == "saga" && strings.HasPrefix(msg, "saga ")) {
			t.Errorf("%s: message %q does not start with %q", e.name, msg, pkg+": ")
		}
		if strings.Count(msg, pkg+": ") > 1 {
			t.Errorf("%s: message %q names its package twice", e.name, msg)
		}
	}
}

// exportedErrorDecl matches the declarations TestEveryExportedErrorIsListed
// collects: exported variables named Err… and exported struct types named …Error.
var errVarName = regexp.MustCompile(`^Err[A-Z0-9]`)

// TestEveryExportedErrorIsListed parses every SDK package and fails for an
// exported error that exportedErrors does not list, so a new error cannot skip
// saying whether it is retryable.
func TestEveryExportedErrorIsListed(t *testing.T) {
	listed := map[string]bool{}
	for _, e := range exportedErrors {
		listed[e.name] = true
	}
	for _, p := range modulePkgs(t) {
		if rel := strings.TrimPrefix(p.importPath, modulePath+"/"); strings.HasPrefix(rel, "cmd/") || strings.HasPrefix(rel, "internal/") {
			continue // not API: cmd/ is main, internal/ is ours
		}
		for _, name := range declaredErrors(p) {
			if !listed[name] {
				t.Errorf("%s (in %s) is not in exportedErrors: add it with its documented retry answer", name, p.dir)
			}
		}
	}
	// And the list holds only values of the types it names.
	for _, e := range exportedErrors {
		if strings.HasPrefix(e.name, "*") && !strings.HasSuffix(reflect.TypeOf(e.err).String(), e.name[strings.LastIndex(e.name, "."):]) {
			t.Errorf("%s is listed with a %T", e.name, e.err)
		}
	}
}

// declaredErrors returns the exported errors declared in p, as "pkg.ErrX" and
// "*pkg.XError".
func declaredErrors(p *pkg) []string {
	var out []string
	for _, f := range p.files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range g.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() && errVarName.MatchString(n.Name) {
							out = append(out, p.name+"."+n.Name)
						}
					}
				case *ast.TypeSpec:
					if _, isStruct := s.Type.(*ast.StructType); isStruct && s.Name.IsExported() && strings.HasSuffix(s.Name.Name, "Error") {
						out = append(out, "*"+p.name+"."+s.Name.Name)
					}
				}
			}
		}
	}
	return out
}
