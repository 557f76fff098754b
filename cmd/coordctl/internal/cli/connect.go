package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// globals are the connection and output flags every command shares.
type globals struct {
	// etcd, named as etcdctl names them (and read from ETCDCTL_* likewise)
	endpoints      []string
	cacert         string
	cert, key      string
	user, password string
	insecureTLS    bool
	dialTimeout    time.Duration
	commandTimeout time.Duration

	// PostgreSQL: a DSN as psql and pgx take it (URL or key=value), else
	// DATABASE_URL, else the PG* variables.
	db                                         string
	schema                                     string
	fenceTable, outboxTable, outboxParkedTable string
	sagaTable, idemTable, auditTable           string

	output      string
	actor       string
	prometheus  string
	etcdMetrics []string

	etcdOnce sync.Once
	etcdCli  *clientv3.Client
	etcdErr  error
	dbOnce   sync.Once
	pool     *pgxpool.Pool
	poolErr  error
}

// envOf returns the environment variable a flag falls back to.
func envOf(flag string) string {
	switch flag {
	case "endpoints", "cacert", "cert", "key", "user", "password", "insecure-skip-tls-verify", "dial-timeout", "command-timeout":
		return "ETCDCTL_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
	case "db":
		return "DATABASE_URL"
	case "etcd-metrics":
		return "COORDCTL_ETCD_METRICS"
	}
	return "COORDCTL_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func (g *globals) register(fs *pflag.FlagSet) {
	fs.StringSliceVar(&g.endpoints, "endpoints", []string{"127.0.0.1:2379"}, "etcd endpoints (env ETCDCTL_ENDPOINTS)")
	fs.StringVar(&g.cacert, "cacert", "", "verify etcd's certificate with this CA bundle (env ETCDCTL_CACERT)")
	fs.StringVar(&g.cert, "cert", "", "client certificate for etcd (env ETCDCTL_CERT)")
	fs.StringVar(&g.key, "key", "", "client key for etcd (env ETCDCTL_KEY)")
	fs.StringVar(&g.user, "user", "", "etcd user[:password] (env ETCDCTL_USER)")
	fs.StringVar(&g.password, "password", "", "etcd password (env ETCDCTL_PASSWORD)")
	fs.BoolVar(&g.insecureTLS, "insecure-skip-tls-verify", false, "do not verify etcd's certificate (env ETCDCTL_INSECURE_SKIP_TLS_VERIFY)")
	fs.DurationVar(&g.dialTimeout, "dial-timeout", 2*time.Second, "timeout to connect to etcd or PostgreSQL (env ETCDCTL_DIAL_TIMEOUT)")
	fs.DurationVar(&g.commandTimeout, "command-timeout", 10*time.Second, "timeout of one command, serve excepted (env ETCDCTL_COMMAND_TIMEOUT)")
	fs.StringVar(&g.db, "db", "", "PostgreSQL DSN, URL or key=value (env DATABASE_URL; else the PG* variables)")
	fs.StringVar(&g.schema, "schema", "", "schema of the coordkit tables (default: the connection's search_path) (env COORDCTL_SCHEMA)")
	fs.StringVar(&g.fenceTable, "fence-table", "", "pgfence table (default coord_fences)")
	fs.StringVar(&g.outboxTable, "outbox-table", "", "outbox table (default coord_outbox)")
	fs.StringVar(&g.outboxParkedTable, "outbox-parked-table", "", "outbox dead-letter table (default <outbox-table>_parked)")
	fs.StringVar(&g.sagaTable, "saga-table", "", "saga table (default coord_sagas)")
	fs.StringVar(&g.idemTable, "idem-table", "", "idempotency key table (default coord_idempotency_keys)")
	fs.StringVar(&g.auditTable, "audit-table", "", "coordctl's audit table (default coordctl_audit)")
	fs.StringVarP(&g.output, "output", "o", "table", "output format: table or json (env COORDCTL_OUTPUT)")
	fs.StringVar(&g.actor, "actor", "", "who you are, for the audit table (default: $USER@hostname) (env COORDCTL_ACTOR)")
	fs.StringVar(&g.prometheus, "prometheus", "", "Prometheus base URL, for the overview's fence rejections and the tenants' watches (env COORDCTL_PROMETHEUS)")
	fs.StringSliceVar(&g.etcdMetrics, "etcd-metrics", nil, "etcd members' metrics URLs for the tenants view (default: /metrics of each endpoint) (env COORDCTL_ETCD_METRICS)")
}

// fromEnv sets every flag the command line left alone from its variable.
func fromEnv(fs *pflag.FlagSet, getenv func(string) string) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		if v := getenv(envOf(f.Name)); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", envOf(f.Name), v, err))
			}
		}
	})
	return errors.Join(errs...)
}

// dbConfigured reports whether the user said where PostgreSQL is: coordctl never
// guesses a database to change.
func (g *globals) dbConfigured(getenv func(string) string) bool {
	if g.db != "" {
		return true
	}
	for _, v := range []string{"PGHOST", "PGDATABASE", "PGSERVICE", "PGPORT", "PGUSER"} {
		if getenv(v) != "" {
			return true
		}
	}
	return false
}

func (g *globals) etcd(ctx context.Context) (*clientv3.Client, error) {
	g.etcdOnce.Do(func() { g.etcdCli, g.etcdErr = g.dialEtcd(ctx) })
	return g.etcdCli, g.etcdErr
}

func (g *globals) dialEtcd(ctx context.Context) (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: g.endpoints, DialTimeout: g.dialTimeout, Context: context.WithoutCancel(ctx), Logger: zap.NewNop()}
	t, err := g.etcdTLS()
	if err != nil {
		return nil, err
	}
	cfg.TLS = t
	if g.user != "" {
		cfg.Username, cfg.Password, _ = strings.Cut(g.user, ":")
		if g.password != "" {
			cfg.Password = g.password
		}
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("coordctl: etcd %s: %w", strings.Join(g.endpoints, ","), err)
	}
	return cli, nil
}

// etcdTLS is the TLS configuration of etcd's endpoints (nil: plain text).
func (g *globals) etcdTLS() (*tls.Config, error) {
	if g.cacert != "" || g.cert != "" || g.insecureTLS || hasHTTPS(g.endpoints) {
		t := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: g.insecureTLS} //nolint:gosec // the operator asked for it
		if g.cacert != "" {
			pem, err := os.ReadFile(g.cacert)
			if err != nil {
				return nil, fmt.Errorf("coordctl: --cacert: %w", err)
			}
			t.RootCAs = x509.NewCertPool()
			if !t.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("coordctl: --cacert %s: no certificate in it", g.cacert)
			}
		}
		if g.cert != "" || g.key != "" {
			pair, err := tls.LoadX509KeyPair(g.cert, g.key)
			if err != nil {
				return nil, fmt.Errorf("coordctl: --cert/--key: %w", err)
			}
			t.Certificates = []tls.Certificate{pair}
		}
		return t, nil
	}
	return nil, nil
}

// metricsURLs are the etcd members' /metrics: --etcd-metrics, else each
// endpoint's (etcd serves its metrics on its client URLs).
func (g *globals) metricsURLs() []string {
	if len(g.etcdMetrics) > 0 {
		return g.etcdMetrics
	}
	var out []string
	for _, e := range g.endpoints {
		if !strings.Contains(e, "://") {
			scheme := "http://"
			if g.cacert != "" || g.cert != "" || g.insecureTLS {
				scheme = "https://"
			}
			e = scheme + e
		}
		out = append(out, strings.TrimSuffix(e, "/")+"/metrics")
	}
	return out
}

func hasHTTPS(eps []string) bool {
	for _, e := range eps {
		if strings.HasPrefix(e, "https://") {
			return true
		}
	}
	return false
}

func (g *globals) database(ctx context.Context) (*pgxpool.Pool, error) {
	g.dbOnce.Do(func() {
		cfg, err := pgxpool.ParseConfig(g.db) // "" reads the PG* variables
		if err != nil {
			g.poolErr = fmt.Errorf("coordctl: --db: %w", err)
			return
		}
		if cfg.ConnConfig.ConnectTimeout == 0 {
			cfg.ConnConfig.ConnectTimeout = g.dialTimeout
		}
		cfg.MaxConns = 4
		if _, set := cfg.ConnConfig.RuntimeParams["application_name"]; !set {
			cfg.ConnConfig.RuntimeParams["application_name"] = "coordctl"
		}
		g.pool, g.poolErr = pgxpool.NewWithConfig(context.WithoutCancel(ctx), cfg)
	})
	return g.pool, g.poolErr
}

func (g *globals) close() {
	if g.etcdCli != nil {
		_ = g.etcdCli.Close()
	}
	if g.pool != nil {
		g.pool.Close()
	}
}

// via is how a CLI change is recorded beside its actor: "cli" and the
// operating-system account that ran it, so that an --actor someone declared
// (--actor root) is never the only identity the audit row keeps.
func (a *app) via() string { return "cli " + defaultActor() }

// defaultActor is $USER@hostname.
func defaultActor() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}
