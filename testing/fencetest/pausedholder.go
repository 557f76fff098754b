package fencetest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// checkPausedHolder: the holder checks its lease and stalls before writing; its
// etcd traffic goes silent (a blackholing proxy), so etcd expires its lease; a
// rival acquires and writes; then the stalled write arrives and must be refused.
func checkPausedHolder(ctx context.Context, k *kit, r Resource, name string) error {
	u, err := url.Parse(k.cfg.Endpoints[0])
	if err != nil || u.Host == "" {
		return fmt.Errorf("fencetest: endpoint %q is not a URL: %v", k.cfg.Endpoints[0], err)
	}
	proxy := coordtest.NewProxy(k.t, u.Host)
	defer proxy.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{proxy.URL()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("fencetest: holder client: %w", err)
	}
	defer cli.Close()
	hs, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: k.cfg.Tenant, TTL: k.cfg.TTL})
	if err != nil {
		return fmt.Errorf("fencetest: holder session: %w", err)
	}
	defer func() {
		proxy.Heal()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = hs.Close(cctx) // its lease is gone already
	}()
	holder, err := correctnesslease.Acquire(ctx, hs, name)
	if err != nil {
		return fmt.Errorf("fencetest: holder acquire: %w", err)
	}
	old := holder.Token()
	if err := mustAccept(ctx, r, old, name, "holder", "holder before its pause"); err != nil {
		return err
	}

	// Leadership check passes; then the holder stalls and goes silent.
	if err := holder.Err(); err != nil {
		return fmt.Errorf("fencetest: holder lost its lease before the pause: %w", err)
	}
	proxy.Blackhole()
	paused := time.Now()

	rival, err := correctnesslease.Acquire(ctx, k.session, name) // waits for etcd to expire the holder
	if err != nil {
		return fmt.Errorf("fencetest: rival acquire (holder paused %v ago): %w", time.Since(paused).Round(time.Millisecond), err)
	}
	defer rival.Release(context.WithoutCancel(ctx))
	cur := rival.Token()
	if c, ok := cur.Compare(old); !ok || c <= 0 {
		return fmt.Errorf("fencetest: rival token %s is not newer than the holder's %s", cur, old)
	}
	if proxy.Stats().Blackholes == 0 {
		return errors.New("fencetest: the holder was never cut off")
	}
	if err := mustAccept(ctx, r, cur, name, "rival", "rival after the holder's lease expired"); err != nil {
		return err
	}
	// The holder wakes up and writes without checking again.
	if err := mustReject(ctx, r, old, name, "zombie", "paused holder's late write"); err != nil {
		return err
	}
	return mustRead(ctx, r, name, "rival", "after the paused holder's write")
}
