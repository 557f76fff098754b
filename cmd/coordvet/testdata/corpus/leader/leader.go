// Package leader runs the billing job under a correctness lease.
package leader

import (
	"context"
	"log"
	"log/slog"
	"net/http"
	"strconv"

	"example.com/coordvete2e/corpus/fencing"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Job is the billing leader.
type Job struct {
	Session *correctnesslease.Session
	Pool    *pgxpool.Pool
	HTTP    *http.Client
	current *correctnesslease.Lease
}

func (j *Job) chargeUnfenced(ctx context.Context) error {
	_, err := j.Pool.Exec(ctx, `UPDATE invoices SET charged = true WHERE due < now()`)
	return err
}

// LogsTheToken holds the lease, logs its token and charges without it.
func (j *Job) LogsTheToken(ctx context.Context) error {
	lease, err := correctnesslease.Acquire(ctx, j.Session, "billing")
	if err != nil {
		return err
	}
	defer lease.Release(ctx)
	slog.Info("leading", "token", lease.Token()) // corpus: fencetoken
	return j.chargeUnfenced(lease.Context())
}

// HandsToWatcher hands the lease to a helper that only watches it.
func (j *Job) HandsToWatcher(ctx context.Context) error {
	lease, err := correctnesslease.Acquire(ctx, j.Session, "billing")
	if err != nil {
		return err
	}
	fencing.Watch(ctx, lease) // corpus: fencetoken
	return j.chargeUnfenced(lease.Context())
}

// KeepsItAside takes the token, sets it aside and formats it for a log line.
func (j *Job) KeepsItAside(ctx context.Context) error {
	lease, err := correctnesslease.TryAcquire(ctx, j.Session, "billing")
	if err != nil {
		return err
	}
	tok := lease.Token()
	_ = tok
	log.Printf("leader %s", fencing.Describe(tok)) // corpus: fencetoken
	return j.chargeUnfenced(ctx)
}

// LoopLogs runs the leader loop but only logs its token.
func (j *Job) LoopLogs(ctx context.Context) error {
	return correctnesslease.Run(ctx, j.Session, "billing", func(ctx context.Context, tok coord.Token) error { // corpus: fencetoken
		slog.Info("term started", "revision", tok.Revision())
		return j.chargeUnfenced(ctx)
	}, nil)
}

// DropsIt discards the token.
func (j *Job) DropsIt(ctx context.Context) error {
	lease, err := correctnesslease.Acquire(ctx, j.Session, "billing") // corpus: fencetoken
	if err != nil {
		return err
	}
	_ = lease.Token() // corpus: fencetoken
	return j.chargeUnfenced(ctx)
}

// Corrected cases.

//corpus:negative
func (j *Job) Fenced(ctx context.Context) error {
	lease, err := correctnesslease.Acquire(ctx, j.Session, "billing")
	if err != nil {
		return err
	}
	defer lease.Release(ctx)
	slog.Info("leading", "token", lease.Token())
	return fencing.ChargeAll(lease.Context(), j.Pool, lease.Token())
}

//corpus:negative
func (j *Job) Loop(ctx context.Context) error {
	return correctnesslease.Run(ctx, j.Session, "billing", func(ctx context.Context, tok coord.Token) error {
		return fencing.ChargeAll(ctx, j.Pool, tok)
	}, nil)
}

//corpus:negative
func (j *Job) AsQueryArgument(ctx context.Context) error {
	lease, err := correctnesslease.Acquire(ctx, j.Session, "billing")
	if err != nil {
		return err
	}
	_, err = j.Pool.Exec(ctx, `UPDATE ledger SET charged = true WHERE fence <= $1`, lease.Token().Revision())
	return err
}

//corpus:negative
func (j *Job) AsHeader(ctx context.Context, url string) error {
	lease, err := correctnesslease.Acquire(ctx, j.Session, "billing")
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(lease.Context(), http.MethodPost, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set(coord.TokenHeader, lease.Token().String())
	resp, err := j.HTTP.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

//corpus:negative
func (j *Job) AsFormattedHeader(ctx context.Context, req *http.Request) error {
	lease, err := correctnesslease.Acquire(ctx, j.Session, "billing")
	if err != nil {
		return err
	}
	req.Header.Set("X-Billing-Revision", strconv.FormatInt(lease.Token().Revision(), 10))
	return nil
}

//corpus:negative
func (j *Job) KeepsTheLease(ctx context.Context) error {
	lease, err := correctnesslease.Acquire(ctx, j.Session, "billing")
	if err != nil {
		return err
	}
	j.current = lease
	return nil
}

//corpus:negative
func (j *Job) ReturnsTheToken(ctx context.Context) (coord.Token, error) {
	lease, err := correctnesslease.Acquire(ctx, j.Session, "billing")
	if err != nil {
		return coord.Token{}, err
	}
	return lease.Token(), nil
}
