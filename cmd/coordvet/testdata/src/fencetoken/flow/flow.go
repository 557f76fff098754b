package flow

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net/http"

	"fencetoken/flowhelp"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/jackc/pgx/v5/pgxpool"
)

func OnlyLogged(ctx context.Context, s *correctnesslease.Session) error {
	lease, err := correctnesslease.Acquire(ctx, s, "billing")
	if err != nil {
		return err
	}
	slog.Info("leading", "token", lease.Token().String()) // want `the token of lease \(from Acquire, line 18\) reaches no write: only logged \(line 22\)`
	return nil
}

func AssignedToBlankLater(ctx context.Context, s *correctnesslease.Session) error {
	lease, err := correctnesslease.Acquire(ctx, s, "billing")
	if err != nil {
		return err
	}
	tok := lease.Token()
	_ = tok
	log.Printf("token %v", tok) // want `the token of lease \(from Acquire, line 27\) reaches no write`
	return nil
}

// A helper in another package that drops the token.
func HandedToWatcher(ctx context.Context, s *correctnesslease.Session) error {
	lease, err := correctnesslease.Acquire(ctx, s, "billing")
	if err != nil {
		return err
	}
	go flowhelp.Watch(ctx, lease) // want `reaches no write: handed to Watch \(line 43\), which drops it`
	return nil
}

// A helper of this package that drops it, one call deeper.
func HandedToLocal(ctx context.Context, s *correctnesslease.Session) error {
	lease, err := correctnesslease.Acquire(ctx, s, "billing")
	if err != nil {
		return err
	}
	return supervise(ctx, lease) // want `handed to supervise`
}

func supervise(ctx context.Context, l *correctnesslease.Lease) error { return report(l.Token()) }

func report(tok coord.Token) error {
	return fmt.Errorf("stopped at %s", tok)
}

// An exception written at the acquire (where the finding used to be) still holds.
func LoggedUnderException(ctx context.Context, s *correctnesslease.Session) error {
	//coordvet:ignore fencetoken owner=platform expires=2026-09-30 the gauge leader writes nothing
	lease, err := correctnesslease.Acquire(ctx, s, "gauge")
	if err != nil {
		return err
	}
	slog.Info("gauge leader", "token", lease.Token())
	return nil
}

func RunLogsOnly(ctx context.Context, s *correctnesslease.Session) error {
	return correctnesslease.Run(ctx, s, "billing", func(ctx context.Context, tok coord.Token) error { // want `token tok reaches no write: only logged`
		slog.Info("leader", "tok", tok)
		return nil
	}, nil)
}

// Corrected: each token reaches a write.

func ThroughHelper(ctx context.Context, s *correctnesslease.Session) error {
	lease, err := correctnesslease.Acquire(ctx, s, "billing")
	if err != nil {
		return err
	}
	slog.Info("leading", "token", lease.Token())
	return flowhelp.Charge(ctx, lease.Token())
}

func AsQueryArgument(ctx context.Context, s *correctnesslease.Session, pool *pgxpool.Pool) error {
	lease, err := correctnesslease.Acquire(ctx, s, "billing")
	if err != nil {
		return err
	}
	rev := lease.Token().Revision()
	_, err = pool.Exec(ctx, "update ledger set v = 1 where fence <= $1", rev)
	return err
}

func AsHeader(ctx context.Context, s *correctnesslease.Session, req *http.Request) error {
	lease, err := correctnesslease.Acquire(ctx, s, "billing")
	if err != nil {
		return err
	}
	text, _ := lease.Token().MarshalText()
	req.Header.Set("Coord-Fencing-Token", string(text))
	return nil
}

func Returned(ctx context.Context, s *correctnesslease.Session) (coord.Token, error) {
	lease, err := correctnesslease.Acquire(ctx, s, "billing")
	if err != nil {
		return coord.Token{}, err
	}
	return lease.Token(), nil
}
