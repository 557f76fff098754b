// Package grpcresolver is a gRPC name resolver over membership.Watch: a channel
// dialled as "coord:///{tenant}/{service}" balances over the service's
// registered instances, with each member's metadata passed to the balancer as
// attributes.
//
// Unlike etcd's client/v3/naming resolver it never freezes: the underlying
// Watcher resumes after any watch error, re-lists after compaction and starts
// from a linearizable read. While etcd is unreachable the channel keeps its
// last addresses (fail static). ResolveNow re-reads the service from etcd.
//
// The adapter lives in its own package so that the membership package itself
// does not import gRPC's resolver API.
package grpcresolver

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/resolver"

	"github.com/coordkit/coordkit/membership"
)

// Defaults of Config.
const (
	// DefaultScheme is the target scheme: "coord:///{tenant}/{service}".
	DefaultScheme = "coord"
	// DefaultMinRefreshInterval: ResolveNow re-reads etcd at most this often
	// per channel (gRPC calls it on every connection failure).
	DefaultMinRefreshInterval = time.Second
)

// Config configures the resolver. Every field has a default.
type Config struct {
	// Scheme of the targets this builder resolves. Default DefaultScheme.
	Scheme string
	// Watch configures each channel's Watcher (membership.WatchConfig's own
	// defaults; Logger defaults to Logger).
	Watch membership.WatchConfig
	// MinRefreshInterval bounds how often ResolveNow re-reads etcd.
	// Default DefaultMinRefreshInterval.
	MinRefreshInterval time.Duration
	// Logger receives target errors and refresh failures. Default slog.Default().
	Logger *slog.Logger
}

// withDefaults returns a copy of c with every zero field set from the
// Default… constants.
func (c Config) withDefaults() Config {
	c.Scheme = cmp.Or(c.Scheme, DefaultScheme)
	c.MinRefreshInterval = cmp.Or(c.MinRefreshInterval, DefaultMinRefreshInterval)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Watch.Logger = cmp.Or(c.Watch.Logger, c.Logger)
	return c
}

// validate checks a Config after withDefaults. Errors are *ConfigError.
func (c Config) validate() error {
	if c.MinRefreshInterval < 0 {
		return &ConfigError{Field: "MinRefreshInterval", Reason: "negative"}
	}
	return nil
}

// NewBuilder returns a resolver.Builder for cli. Pass it to grpc.NewClient
// with grpc.WithResolvers (or register it with resolver.Register). It returns
// a *ConfigError (ErrInvalidConfig) for a nil client or an invalid cfg (the
// zero Config takes the defaults); cfg.Watch is checked by each Build. Every
// resolver it builds follows its service through the client's shared watch
// plane: one upstream etcd watch for all of a tenant's services.
func NewBuilder(cli *clientv3.Client, cfg Config) (resolver.Builder, error) {
	if cli == nil {
		return nil, &ConfigError{Field: "client", Reason: "nil *clientv3.Client"}
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &builder{cli: cli, cfg: cfg}, nil
}

type builder struct {
	cli *clientv3.Client
	cfg Config
}

// Scheme returns the configured scheme.
func (b *builder) Scheme() string { return b.cfg.Scheme }

// Build starts a Watcher for the target's service; it does not block on etcd.
// The target is "scheme:///{tenant}/{service}" (or "scheme://{tenant}/{service}").
func (b *builder) Build(target resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	tenant, service, err := parseTarget(target)
	if err != nil {
		return nil, err
	}
	w, err := membership.Watch(context.Background(), b.cli, tenant, service, b.cfg.Watch)
	if err != nil {
		return nil, &ConfigError{Field: "target", Reason: fmt.Sprintf("%q: %v", target.String(), err), Err: err}
	}
	r := &coordResolver{w: w, cc: cc, cfg: b.cfg, wake: make(chan struct{}, 1), lastRev: -1}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.wg.Add(2)
	go r.follow()
	go r.refresher()
	return r, nil
}

// parseTarget splits "/{tenant}/{service}" (or host {tenant}, path /{service}).
func parseTarget(t resolver.Target) (tenant, service string, err error) {
	path := strings.TrimPrefix(t.URL.Path, "/")
	if t.URL.Path == "" {
		path = t.URL.Opaque
	}
	if t.URL.Host != "" {
		path = t.URL.Host + "/" + path
	}
	tenant, service, ok := strings.Cut(path, "/")
	if !ok || tenant == "" || service == "" || strings.Contains(service, "/") {
		return "", "", &ConfigError{Field: "target", Reason: fmt.Sprintf("%q is not %s:///{tenant}/{service}", t.String(), t.URL.Scheme)}
	}
	return tenant, service, nil
}

type coordResolver struct {
	w      *membership.Watcher
	cc     resolver.ClientConn
	cfg    Config
	wake   chan struct{} // cap 1: ResolveNow asked for a refresh
	ctx    context.Context
	cancel context.CancelFunc // ends the refresher
	wg     sync.WaitGroup

	mu      sync.Mutex // serialises UpdateState
	lastRev int64
}

// follow pushes every view the watcher delivers.
func (r *coordResolver) follow() {
	defer r.wg.Done()
	for v := range r.w.Updates() {
		r.push(v)
	}
}

// refresher serves ResolveNow: one re-read at a time, at most one per
// MinRefreshInterval, triggers in between coalesced.
func (r *coordResolver) refresher() {
	defer r.wg.Done()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.wake:
		}
		v, err := r.w.Refresh(r.ctx)
		switch {
		case err == nil:
			r.push(v)
		case r.ctx.Err() == nil:
			r.cfg.Logger.Debug("grpcresolver: refresh failed; keeping the last addresses", "err", err)
		}
		t := time.NewTimer(r.cfg.MinRefreshInterval)
		select {
		case <-r.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// push gives the channel the view's addresses, never an older view after a
// newer one. Members without an address are skipped.
func (r *coordResolver) push(v membership.View) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v.Revision < r.lastRev {
		return
	}
	r.lastRev = v.Revision
	// One endpoint per member, its record in the endpoint's attributes (for
	// the LB policy; they do not make gRPC reconnect when metadata changes).
	// Addresses repeats them for LB policies that predate endpoints.
	s := resolver.State{Attributes: attributes.New(revisionKey{}, v.Revision)}
	for _, m := range v.Members {
		if m.Addr == "" {
			continue
		}
		a := resolver.Address{Addr: m.Addr}
		s.Addresses = append(s.Addresses, a)
		s.Endpoints = append(s.Endpoints, resolver.Endpoint{Addresses: []resolver.Address{a}, Attributes: attributes.New(memberKey{}, memberAttr{m})})
	}
	// A watch-based resolver re-resolves by itself: an error from the
	// balancer (e.g. no addresses) needs no retry here.
	_ = r.cc.UpdateState(s)
}

// ResolveNow asks for a re-read of the service from etcd; it does not block.
func (r *coordResolver) ResolveNow(resolver.ResolveNowOptions) {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Close stops the watcher and waits for the resolver's goroutines.
func (r *coordResolver) Close() {
	r.cancel()
	r.w.Close()
	r.wg.Wait()
}
