package outbox

import (
	"context"

	"github.com/coordkit/coordkit/coord"
)

// listen holds one connection LISTENing on the channel and signals wake on every
// notification (and after each reconnect, since notifications sent while it was
// away are lost). It returns when ctx is done.
func (r *Relay) listen(ctx context.Context, wake chan<- struct{}) {
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if attempt > 0 && r.cfg.Backoff.Wait(ctx, coord.SystemClock(), min(attempt-1, 8)) != nil {
			return
		}
		pc, err := r.db.Acquire(ctx)
		if err != nil {
			continue
		}
		conn := pc.Hijack() // a LISTENing connection must never go back to the pool
		if _, err := conn.Exec(ctx, "LISTEN "+r.o.channel); err != nil {
			conn.Close(context.WithoutCancel(ctx))
			continue
		}
		// The presence lock, shared, for as long as this connection lives: other
		// relays count it to know whether they are alone (see claim.go).
		if _, err := conn.Exec(ctx, r.o.sql.presence, r.o.presence, r.o.table); err != nil {
			conn.Close(context.WithoutCancel(ctx))
			continue
		}
		attempt = 0
		signal()
		for {
			if _, err := conn.WaitForNotification(ctx); err != nil {
				break
			}
			r.stats.wakeups.Add(1)
			signal()
		}
		conn.Close(context.WithoutCancel(ctx))
	}
}
