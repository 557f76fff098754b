// Package schedule runs periodic jobs over many processes with exactly one
// effect per scheduled time — through pauses, failovers, restarts and DST.
//
// It is a composite package (docs/architecture.md), made of ownership and
// correctnesslease: the schedulers of a tenant form an ownership group, each
// job hashes onto one of its partitions ([PartitionOf]), and only that
// partition's owner fires the job. A failover moves only the moving
// partitions' jobs; every other job keeps firing.
//
// A fire is an identity, [ID]: (tenant, job, local wall-clock time in the
// job's zone, fold), with the nominal UTC instant beside it. The [Handler]
// gets the fire with the partition's token and a derived idempotency key
// ([ID.Key]) and writes its effect in the fire's transaction, which also holds
// the pgfence check of the token, the fire's record (unique on the identity)
// and the job's last nominal time: a scheduler paused past its lease is
// rejected by the fence, a retry of a fire that committed by the key. That
// transaction costs two round trips beyond the handler's own statements
// (BEGIN, the guard and the job row's lock in one; the record and COMMIT in
// the other) and no etcd request.
//
// Catch-up starts from the persisted last nominal time, never from memory:
// after a pause or an outage the due fires run as Job.CatchUp says (all, at
// most MaxCatchUp; the latest; none), fires older than Job.Window are missed,
// and every miss is recorded and counted with its reason. DST has explicit
// policies: a time in the spring gap runs once at the end of the gap
// (GapRunAtEnd) or is skipped (GapSkip); a time the autumn fold repeats fires
// once (FoldOnce), at its second reading (FoldLast) or twice (FoldTwice).
//
//	s, err := schedule.New(etcd, pool, schedule.Config{Tenant: "acme"})
//	if err != nil {
//		return err
//	}
//	err = s.Add(schedule.Job{Name: "billing", Cron: "0 9 1 * *", Zone: "Europe/Berlin",
//		Handler: func(ctx context.Context, tx pgx.Tx, f *schedule.Fire) error {
//			return bill(ctx, tx, f.Key()) // in tx: commits with the fire's record
//		}})
//	if err != nil {
//		return err
//	}
//	if err := s.Migrate(ctx, pool); err != nil { // and pgfence.Migrate once
//		return err
//	}
//	sess, err := correctnesslease.NewSession(ctx, etcd, correctnesslease.Config{Tenant: "acme"})
//	if err != nil {
//		return err
//	}
//	defer sess.Close(context.WithoutCancel(ctx))
//	return s.Run(ctx, sess) // until ctx ends; ErrStopped when the session is lost
//
// Operators use [Admin] (or the Scheduler, which embeds one): List, Pause,
// Resume, Trigger, SkipNext, Backfill — each audited. See docs/schedule.md.
package schedule
