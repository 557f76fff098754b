package coordtest

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// RoundTrips counts the round trips of the PostgreSQL connections it watches, on
// the wire: a round trip is a flight of client bytes sent after the server's last
// answer (or first on the connection). Statements pipelined in one batch, or sent
// with BEGIN or COMMIT, are one round trip; a statement pgx prepares before it can
// run, a pool's ping of an idle connection and a ROLLBACK are each one more. That
// is why it counts bytes and not pgx's calls: a tracer of queries and batches would
// miss the prepares and the pings, and a round trip is what costs.
//
// Count the round trips of one operation with Of, on a warmed pool (the first use
// of a statement on a connection prepares it) and with nothing else using the
// pool. Safe for concurrent use.
type RoundTrips struct{ n atomic.Int64 }

// Dial wraps a pgconn dialer so that the connections it dials count their round
// trips in rt: cfg.ConnConfig.DialFunc = rt.Dial(cfg.ConnConfig.DialFunc), before
// connecting. The zero RoundTrips is ready to use.
func (rt *RoundTrips) Dial(next pgconn.DialFunc) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cc := &countedConn{Conn: c, rt: rt}
		cc.answered.Store(true)
		return cc, nil
	}
}

// CountingPool returns a pool of at most maxConns connections on db's schema whose
// round trips the returned counter counts. The pool is closed when t ends.
func (db *PostgresDB) CountingPool(t testing.TB, maxConns int32) (*pgxpool.Pool, *RoundTrips) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatalf("coordtest: pool config: %v", err)
	}
	cfg.MaxConns = maxConns
	rt := &RoundTrips{}
	cfg.ConnConfig.DialFunc = rt.Dial(cfg.ConnConfig.DialFunc)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("coordtest: counting pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, rt
}

// Count returns the round trips counted so far.
func (rt *RoundTrips) Count() int64 { return rt.n.Load() }

// Of runs op n times, one after another, and returns the round trips per run (the
// total divided by n, as a float so that an occasional extra one shows). It
// stops at op's first error and returns it.
func (rt *RoundTrips) Of(n int, op func() error) (float64, error) {
	before := rt.Count()
	for range n {
		if err := op(); err != nil {
			return 0, err
		}
	}
	return float64(rt.Count()-before) / float64(n), nil
}

// countedConn counts flights of writes: a Write after the server answered is a
// new round trip; further Writes before the next answer belong to the same one.
type countedConn struct {
	net.Conn
	rt       *RoundTrips
	answered atomic.Bool // server data arrived since the last counted flight
}

func (c *countedConn) Write(p []byte) (int, error) {
	if len(p) > 0 && c.answered.Swap(false) {
		c.rt.n.Add(1)
	}
	return c.Conn.Write(p)
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.answered.Store(true)
	}
	return n, err
}
