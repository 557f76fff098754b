// Command ownworker is one member process of the ownership reliability
// scenario (reliability/ownership_test.go): it joins an ownership group and, for
// every partition it owns, writes fenced rows to PostgreSQL continuously through
// pgfence, one fence row per partition (the partition's token). It reports on
// stdout, one line each, with wall-clock nanoseconds (the parent runs on the same
// host):
//
//	JOINED <member id> <ns>                   after each Join
//	ACQ <partition> <token> <ns> <reason>    an Acquired event
//	REV <partition> <token> <ns> <reason>    a Revoked event
//	END <partition> <token> <ns> planned|lost the partition's context ended
//	C <id> <partition> <token> <ns> <late>   a write is sent (late: 1 when sent after a loss)
//	R <id> ok <seq> <ns> | R <id> stale|busy|amb <ns>   its outcome
//	LEFT <ns>                                after a SIGTERM's Leave returned
//
// A write is "late" when its writer learned of the loss of its partition
// (step-down, session expiry) and writes anyway with the old token, as a worker
// that decided to write before the loss would: it keeps doing so every interval
// until the fence rejects it or two TTLs pass. On a planned revoke the writer
// stops and acknowledges at once (Partition.Done). When the session is lost the
// process closes its member and joins again on a new session.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/ownership"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func main() {
	os.Exit(run())
}

type worker struct {
	name     string
	boot     int64
	ttl      time.Duration
	every    time.Duration
	pool     *pgxpool.Pool
	fence    *pgfence.Fence
	seq      atomic.Int64
	outMu    sync.Mutex
	started  sync.Map // partitionTerm -> struct{}: writers started
	writers  sync.WaitGroup
	shutdown atomic.Bool // SIGTERM received: revokes are the Leave's
	unfenced bool
}

func run() int {
	etcd := flag.String("etcd", "", "comma-separated etcd endpoints")
	pgURL := flag.String("pg", "", "PostgreSQL URL")
	tenant := flag.String("tenant", "rel", "coord tenant")
	group := flag.String("group", "orders", "ownership group")
	partitions := flag.Int("partitions", 30, "partitions of the group")
	ttl := flag.Duration("ttl", 2*time.Second, "member session TTL")
	every := flag.Duration("every", 50*time.Millisecond, "write interval per partition")
	name := flag.String("name", "w", "this worker's name (rows' writer column)")
	unfenced := flag.Bool("unfenced", false, "write without the fence (the scenario's self-test)")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: strings.Split(*etcd, ","), DialTimeout: 2 * time.Second,
		DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second, Logger: zap.NewNop(),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "ownworker:", err)
		return 2
	}
	defer cli.Close()
	pool, err := pgxpool.New(ctx, *pgURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ownworker:", err)
		return 2
	}
	defer pool.Close()
	fence, err := pgfence.New(pgfence.Config{LeaseTTL: *ttl, Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "ownworker:", err)
		return 2
	}
	g, err := ownership.New(cli, ownership.Config{Tenant: *tenant, Group: *group, Partitions: *partitions, Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "ownworker:", err)
		return 2
	}
	w := &worker{name: *name, boot: time.Now().UnixNano(), ttl: *ttl, every: *every, pool: pool, fence: fence, unfenced: *unfenced}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)

	for {
		s, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: *tenant, TTL: *ttl, Logger: log})
		if err != nil {
			time.Sleep(*ttl / 10)
			continue
		}
		m, err := g.Join(ctx, s, map[string]string{"writer": *name})
		if err != nil {
			fmt.Fprintln(os.Stderr, "ownworker: join:", err)
			_ = s.Close(ctx)
			time.Sleep(*ttl / 10)
			continue
		}
		w.emit("JOINED", m.ID(), time.Now().UnixNano())
		if w.serve(m, s, term) {
			w.shutdown.Store(true)
			lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := m.Leave(lctx)
			cancel()
			if err != nil {
				fmt.Fprintln(os.Stderr, "ownworker: leave:", err)
			}
			w.writers.Wait()
			w.emit("LEFT", time.Now().UnixNano())
			_ = s.Close(ctx)
			return 0
		}
		_ = m.Close()
		_ = s.Close(ctx)
	}
}

// serve starts a writer for every partition the member acquires until the
// session is lost (false) or SIGTERM arrives (true). Owned() is polled too, so
// a partition whose Acquired event was dropped still gets its writer.
func (w *worker) serve(m *ownership.Member, s *correctnesslease.Session, term <-chan os.Signal) bool {
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	events := m.Events()
	for {
		select {
		case <-term:
			return true
		case <-s.Done():
			return false
		case ev, ok := <-events:
			if !ok { // the member stopped; s.Done follows
				events = nil
				continue
			}
			tag := "ACQ"
			if ev.Kind == ownership.Revoked {
				tag = "REV"
			}
			w.emit(tag, ev.Partition.ID(), ev.Partition.Token().Revision(), time.Now().UnixNano(), ev.Reason)
			if ev.Kind == ownership.Acquired {
				w.start(ev.Partition)
			}
		case <-poll.C:
			for _, p := range m.Owned() {
				w.start(p)
			}
		}
	}
}

// partitionTerm is one partition held with one token.
type partitionTerm struct {
	partition int
	token     int64
}

func (w *worker) start(p *ownership.Partition) {
	if _, dup := w.started.LoadOrStore(partitionTerm{p.ID(), p.Token().Revision()}, struct{}{}); dup {
		return
	}
	w.writers.Add(1)
	go func() {
		defer w.writers.Done()
		w.writeLoop(p)
	}()
}

// writeLoop writes every interval with the partition's token until its context
// ends; after a loss it goes on as a late writer (see the package doc).
func (w *worker) writeLoop(p *ownership.Partition) {
	tok, ctx := p.Token(), p.Context()
	tick := time.NewTicker(w.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			var lost *coord.AuthorityLostError
			if !errors.As(context.Cause(ctx), &lost) || w.shutdown.Load() {
				w.emit("END", p.ID(), tok.Revision(), time.Now().UnixNano(), "planned")
				p.Done()
				return
			}
			w.emit("END", p.ID(), tok.Revision(), time.Now().UnixNano(), "lost")
			for until := time.Now().Add(2 * w.ttl); time.Now().Before(until); time.Sleep(w.every) {
				if w.write(p.ID(), tok, true) == "stale" {
					return
				}
			}
			return
		case <-tick.C:
			w.write(p.ID(), tok, false)
		}
	}
}

// write makes one fenced write: the partition's counter moves by one and a row
// (partition, seq, token, writer) records it, in one transaction guarded by tok.
func (w *worker) write(partition int, tok coord.Token, late bool) string {
	id := fmt.Sprintf("%s.%d.%d", w.name, w.boot, w.seq.Add(1))
	lateFlag := 0
	if late {
		lateFlag = 1
	}
	w.emit("C", id, partition, tok.Revision(), time.Now().UnixNano(), lateFlag)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var seq int64
	apply := func(ctx context.Context, tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `UPDATE parts SET value = value + 1 WHERE partition = $1 RETURNING value`, partition).Scan(&seq); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO writes (id, partition, seq, token, writer) VALUES ($1, $2, $3, $4, $5)`,
			id, partition, seq, tok.Revision(), w.name)
		return err
	}
	var err error
	if w.unfenced {
		err = pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error { return apply(ctx, tx) })
	} else {
		err = w.fence.Exec(ctx, w.pool, tok, apply)
	}
	now := time.Now().UnixNano()
	switch {
	case err == nil:
		w.emit("R", id, "ok", seq, now)
		return "ok"
	case errors.Is(err, coord.ErrStaleToken):
		w.emit("R", id, "stale", now)
		return "stale"
	case errors.Is(err, pgfence.ErrBusy):
		w.emit("R", id, "busy", now)
		return "busy"
	default:
		w.emit("R", id, "amb", now)
		return "amb"
	}
}

// emit writes one line in a single write (a pipe keeps it whole).
func (w *worker) emit(fields ...any) {
	line := fmt.Sprintln(fields...)
	w.outMu.Lock()
	defer w.outMu.Unlock()
	_, _ = os.Stdout.WriteString(line)
}
