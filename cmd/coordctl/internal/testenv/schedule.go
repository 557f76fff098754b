package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/schedule"
)

// ScheduleTenant and ScheduleJob are the job SeedSchedule registers.
const (
	ScheduleTenant = "acme"
	ScheduleJob    = "invoices"
)

// SeedSchedule migrates package schedule's tables and registers the monthly
// job ScheduleTenant/ScheduleJob (0 9 1 * *, Europe/Berlin) the way a service
// does: a scheduler that declares it runs until its row is written, then
// leaves its group.
func (e *Env) SeedSchedule(t testing.TB) {
	t.Helper()
	ctx := Ctx(t)
	s, err := schedule.New(e.Cli, e.DB.Pool, schedule.Config{Tenant: ScheduleTenant, Partitions: 2, Logger: Logger(t)})
	must(t, err)
	must(t, s.Migrate(ctx, e.DB.Pool))
	must(t, s.Add(schedule.Job{Name: ScheduleJob, Cron: "0 9 1 * *", Zone: "Europe/Berlin",
		Handler: func(context.Context, pgx.Tx, *schedule.Fire) error { return nil }}))
	sess, err := correctnesslease.NewSession(ctx, e.Cli, correctnesslease.Config{Tenant: ScheduleTenant, TTL: 3 * time.Second, Logger: Logger(t)})
	must(t, err)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(rctx, sess) }()
	Wait(t, "the job registered by its scheduler", func() bool {
		js, err := s.JobList(ctx)
		return err == nil && len(js) == 1
	})
	stop()
	must(t, <-done)
	must(t, sess.Close(ctx))
}
