package schedule

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/ownership"
)

// Scheduler runs the jobs declared with Add on the partitions of an ownership
// group that this process owns. Any number of processes run the same jobs:
// each job fires on the owner of its partition only, and every fire's effect
// is fenced by that partition's token. It also offers the operator verbs of
// Admin. Safe for concurrent use.
type Scheduler struct {
	*Admin
	cli     *clientv3.Client
	pool    *pgxpool.Pool
	in      *instruments
	fence   *pgfence.Fence
	mu      sync.Mutex
	jobs    map[string]*job
	started bool
	runners map[int]*runner // by partition, while Run runs
}

// New validates cfg and returns a Scheduler over etcd (the ownership group)
// and PostgreSQL (the fences, the jobs' state and the fire records). It does
// no I/O and does not block; call Migrate (and pgfence's Migrate for the
// fence table) once before Run. It returns a *ConfigError (ErrInvalidConfig)
// for an invalid field or a nil client or pool.
func New(cli *clientv3.Client, pool *pgxpool.Pool, cfg Config) (*Scheduler, error) {
	if cli == nil {
		return nil, &ConfigError{Field: "client", Reason: "nil *clientv3.Client"}
	}
	if pool == nil {
		return nil, &ConfigError{Field: "pool", Reason: "nil *pgxpool.Pool"}
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	a, err := newAdmin(pool, cfg)
	if err != nil {
		return nil, err
	}
	in, err := newInstruments(cfg)
	if err != nil {
		return nil, err
	}
	return &Scheduler{Admin: a, cli: cli, pool: pool, in: in, jobs: map[string]*job{}}, nil
}

// Add declares a job. Call it before Run, with the same jobs in every
// process of the group (a process that lacks a job does not fire it while it
// owns the job's partition). It does not block. It returns a *JobError
// (ErrInvalidJob) for an invalid job or a name declared twice, ErrStarted
// after Run.
func (s *Scheduler) Add(j Job) error {
	nj, err := newJob(j)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return fmt.Errorf("%w: add %s", ErrStarted, j.Name)
	}
	if s.jobs[nj.Name] != nil {
		return &JobError{Job: nj.Name, Field: "Name", Reason: "declared twice"}
	}
	nj.partition = PartitionOf(nj.Name, s.cfg.Partitions)
	s.jobs[nj.Name] = nj
	return nil
}

// PartitionOf returns the ownership partition job hashes onto among
// partitions (FNV-1a of the name, mod partitions). It does not block.
func PartitionOf(job string, partitions int) int {
	h := fnv.New32a()
	h.Write([]byte(job))
	return int(h.Sum32() % uint32(partitions))
}

// Run makes this process one of the group's schedulers on session sess (of
// the Config's tenant) and fires the jobs of every partition it owns until
// ctx ends; then it leaves the group, handing its partitions to the other
// schedulers (their fires in flight finish first, within DrainTimeout), and
// returns nil. It blocks for as long. It returns an error wrapping ErrStopped
// when the session loses its authority (every partition was lost: open a new
// session and Run again, with coord.Backoff between attempts), ErrStarted
// when called twice, and Join's errors (a *ownership.ConfigError, etcd's).
func (s *Scheduler) Run(ctx context.Context, sess *correctnesslease.Session) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return ErrStarted
	}
	s.started = true
	s.runners = map[int]*runner{}
	s.mu.Unlock()
	if s.fence = s.cfg.Fence; s.fence == nil {
		f, err := pgfence.New(pgfence.Config{LeaseTTL: sess.TTL(), Logger: s.cfg.Logger, MeterProvider: s.cfg.MeterProvider})
		if err != nil {
			return err
		}
		s.fence = f
	}
	g, err := ownership.New(s.cli, ownership.Config{Tenant: s.cfg.Tenant, Group: s.cfg.Group, Partitions: s.cfg.Partitions,
		DrainTimeout: s.cfg.DrainTimeout, Logger: s.cfg.Logger, MeterProvider: s.cfg.MeterProvider})
	if err != nil {
		return err
	}
	m, err := g.Join(ctx, sess, map[string]string{"role": "scheduler"})
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	wg.Add(1)
	go func() { defer wg.Done(); s.poll(pollCtx) }()
	serving := map[int]bool{}
	serve := func(p *ownership.Partition) {
		if serving[p.ID()] {
			return
		}
		serving[p.ID()] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serve(p)
		}()
	}
	resync := s.cfg.Clock.NewTimer(s.cfg.PollInterval)
	defer resync.Stop()
	for {
		select {
		case ev, ok := <-m.Events():
			if !ok {
				if err := sess.Err(); err != nil {
					return fmt.Errorf("%w: %w", ErrStopped, err)
				}
				return nil
			}
			if ev.Kind == ownership.Acquired {
				serve(ev.Partition)
			} else {
				delete(serving, ev.Partition.ID())
			}
		case <-resync.C(): // events dropped when the channel was full: Owned is the truth
			for _, p := range m.Owned() {
				serve(p)
			}
			resync.Reset(s.cfg.PollInterval)
		case <-ctx.Done():
			stopPoll()
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.DrainTimeout+5*time.Second)
			err := m.Leave(lctx)
			cancel()
			if err != nil && !errors.Is(err, ownership.ErrClosed) {
				s.cfg.Logger.Warn("schedule: leaving the group failed; the others take over after the TTL", "err", err)
				if cerr := m.Close(); cerr != nil {
					s.cfg.Logger.Warn("schedule: closing the member failed", "err", cerr)
				}
			}
			for range m.Events() {
			}
			return nil
		}
	}
}

// serve fires the jobs of partition p until its context ends, then
// acknowledges the revoke (p.Done).
func (s *Scheduler) serve(p *ownership.Partition) {
	defer p.Done()
	var jobs []*job
	s.mu.Lock()
	for _, j := range s.jobs {
		if j.partition == p.ID() {
			jobs = append(jobs, j)
		}
	}
	s.mu.Unlock()
	if len(jobs) == 0 {
		<-p.Context().Done()
		return
	}
	r := s.newRunner(p.Context(), p.Token(), jobs)
	s.mu.Lock()
	s.runners[p.ID()] = r
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.runners[p.ID()] == r {
			delete(s.runners, p.ID())
		}
		s.mu.Unlock()
	}()
	r.run()
}
