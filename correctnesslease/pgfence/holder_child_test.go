package pgfence_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
)

// Environment of the holder child process.
const (
	envEtcd   = "PGFENCE_TEST_ETCD"
	envPG     = "PGFENCE_TEST_PG"
	envTenant = "PGFENCE_TEST_TENANT"
	envTTL    = "PGFENCE_TEST_TTL"
)

// zombieWrite is the fenced write both the holder and its rival make: a log row
// and a counter bump on the trial's row, in one transaction guarded by the token.
func zombieWrite(ctx context.Context, f *pgfence.Fence, pool *pgxpool.Pool, tok coord.Token, name, writer string) error {
	return f.Exec(ctx, pool, tok, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO writes (name, writer, revision) VALUES ($1, $2, $3)", name, writer, tok.Revision()); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO rows (name, last_writer, writes) VALUES ($1, $2, 1)
			ON CONFLICT (name) DO UPDATE SET last_writer = excluded.last_writer, writes = rows.writes + 1`, name, writer)
		return err
	})
}

// holderMain is the holder process. Protocol, one line each way:
//
//	parent: "round <names comma-separated>"
//	child:  acquires every name, writes once with each token, checks every lease
//	        is still held, prints "checked <name> <token>" per name, then "ready",
//	        and blocks reading stdin — the parent SIGSTOPs it here, after the
//	        leadership check and before the write.
//	parent: "go" (read by the child only after SIGCONT)
//	child:  writes with the old tokens without checking again, prints
//	        "result <name> accepted|rejected|error <msg>", "metric <cumulative
//	        coordkit.pgfence.rejected>" and "done", and closes its (expired) session.
func holderMain() int {
	fail := func(err error) int { fmt.Println("fatal", err); return 2 }
	ttl, err := time.ParseDuration(os.Getenv(envTTL))
	if err != nil {
		return fail(err)
	}
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(os.Getenv(envEtcd), ","), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fail(err)
	}
	defer cli.Close()
	pool, err := pgxpool.New(ctx, os.Getenv(envPG)+"&pool_max_conns=32")
	if err != nil {
		return fail(err)
	}
	defer pool.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	f, err := pgfence.New(pgfence.Config{MeterProvider: mp, Logger: quiet})
	if err != nil {
		return fail(err)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		if cmd == "intx" {
			if err := frozenInTx(ctx, cli, pool, strings.Split(arg, ","), ttl, in); err != nil {
				return fail(err)
			}
			continue
		}
		if cmd != "round" {
			return fail(fmt.Errorf("unexpected command %q", in.Text()))
		}
		names := strings.Split(arg, ",")
		s, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: os.Getenv(envTenant), TTL: ttl, Logger: quiet})
		if err != nil {
			return fail(err)
		}
		leases := make([]*correctnesslease.Lease, len(names))
		for i, n := range names {
			if leases[i], err = correctnesslease.Acquire(ctx, s, n); err != nil {
				return fail(err)
			}
			if err := zombieWrite(ctx, f, pool, leases[i].Token(), n, "holder-before-pause"); err != nil {
				return fail(err)
			}
		}
		for i, l := range leases { // the leadership check
			if err := l.Err(); err != nil {
				return fail(fmt.Errorf("lease %s lost before the pause: %w", names[i], err))
			}
			fmt.Println("checked", names[i], l.Token())
		}
		fmt.Fprintln(os.Stderr, time.Now().Format("15:04:05.000"), "ready", names[0])
		fmt.Println("ready")
		if !in.Scan() || in.Text() != "go" { // SIGSTOPped here
			return fail(fmt.Errorf("want go, got %q", in.Text()))
		}
		fmt.Fprintln(os.Stderr, time.Now().Format("15:04:05.000"), "go", names[0])
		results := make([]string, len(names))
		var wg sync.WaitGroup
		for i, l := range leases {
			wg.Go(func() {
				err := zombieWrite(ctx, f, pool, l.Token(), names[i], "zombie")
				switch {
				case err == nil:
					results[i] = "accepted"
				case errors.Is(err, coord.ErrStaleToken):
					results[i] = "rejected"
				default:
					results[i] = "error " + strings.ReplaceAll(err.Error(), "\n", " ")
				}
			})
		}
		wg.Wait()
		for i, r := range results {
			fmt.Println("result", names[i], r)
		}
		fmt.Println("metric", strconv.FormatInt(sumCounter(ctx, reader, "coordkit.pgfence.rejected"), 10))
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_ = s.Close(cctx) // expired while we were stopped
		cancel()
		fmt.Println("done")
	}
	return 0
}

func sumCounter(ctx context.Context, r *sdkmetric.ManualReader, name string) int64 {
	var rm metricdata.ResourceMetrics
	if err := r.Collect(ctx, &rm); err != nil {
		return -1
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, dp := range s.DataPoints {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// frozenInTx is the "intx" round of the holder: it acquires the lease of each
// name, then, side by side, opens a transaction per lease, fences it (GuardTx)
// and writes; it prints "intx <name> <token>" for each, then "ready", and blocks
// reading stdin with every transaction open and idle — the parent SIGSTOPs it
// here, inside its fenced transactions. After "go" it tries to commit each and
// prints "commit <name> ok|error <msg>", then "done".
//
// Its IdleTimeout is frozenIdleTimeout(ttl): every transaction must still be
// open when the parent checks and pauses the holder, and PostgreSQL's idle timer
// starts at each one's last statement — so the transactions are opened together,
// after the (slower) lease acquisitions, not one after another.
func frozenInTx(ctx context.Context, cli *clientv3.Client, pool *pgxpool.Pool, names []string, ttl time.Duration, in *bufio.Scanner) error {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	f, err := pgfence.New(pgfence.Config{Logger: quiet, LeaseTTL: ttl, IdleTimeout: frozenIdleTimeout(ttl)})
	if err != nil {
		return err
	}
	s, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: os.Getenv(envTenant), TTL: ttl, Logger: quiet})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_ = s.Close(cctx) // expired while we were stopped
		cancel()
	}()
	leases := make([]*correctnesslease.Lease, len(names))
	for i, n := range names {
		if leases[i], err = correctnesslease.Acquire(ctx, s, n); err != nil {
			return err
		}
	}
	txs := make([]pgx.Tx, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() {
			tok := leases[i].Token()
			if txs[i], errs[i] = pool.Begin(ctx); errs[i] != nil {
				return
			}
			if errs[i] = f.GuardTx(ctx, txs[i], tok); errs[i] != nil {
				return
			}
			_, errs[i] = txs[i].Exec(ctx, "INSERT INTO writes (name, writer, revision) VALUES ($1, 'frozen', $2)", n, tok.Revision())
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i, n := range names {
		fmt.Println("intx", n, leases[i].Token())
	}
	fmt.Println("ready")
	if !in.Scan() || in.Text() != "go" { // SIGSTOPped here
		return fmt.Errorf("want go, got %q", in.Text())
	}
	for i, tx := range txs {
		if err := tx.Commit(ctx); err != nil {
			fmt.Println("commit", names[i], "error", strings.ReplaceAll(err.Error(), "\n", " "))
		} else {
			fmt.Println("commit", names[i], "ok")
		}
	}
	fmt.Println("done")
	return nil
}
