// Package console is coordctl's web console: server-rendered html/template pages
// over the admin package (overview, sagas with their step timeline and
// retry/resolve/cancel, parked events with requeue/discard, the lease map, the
// ownership map, the registered members, the audit trail), live through
// server-sent events, with embedded assets and no JavaScript build step. Every
// mutating form carries a CSRF token; the server binds loopback unless a token
// or mTLS guards it.
package console

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Defaults of Config.
const (
	DefaultListen  = "127.0.0.1:8080"
	DefaultRefresh = 2 * time.Second
)

// MinTokenBytes is the shortest token the console accepts: an empty or short
// token is refused at start, never taken for "no authentication".
const MinTokenBytes = 16

// Config configures the console. Each operator should have an identity of
// their own (Tokens, mTLS or a trusted proxy's header): it is what the audit
// rows record.
type Config struct {
	Listen string // default DefaultListen
	// Tokens are per-user tokens (token -> user name, the user being the
	// audit rows' actor), presented as "Authorization: Bearer <token>" or
	// through the login form (a session cookie bound to the user). Token is one
	// shared token, whose users are all Actor. Each at least MinTokenBytes.
	// A token (or mTLS, or a proxy header) is required on a non-loopback Listen.
	Tokens map[string]string
	Token  string
	// TLS serves HTTPS with this certificate; ClientCAs (with TLS) requires and
	// verifies client certificates (mTLS), the actor being the certificate's
	// subject ("mtls:CN=…,O=…").
	TLS       *tls.Certificate
	ClientCAs *x509.CertPool
	// ProxyHeader names the header a trusted authenticating proxy (an OIDC
	// proxy such as oauth2-proxy: X-Forwarded-Email) sets to the user's
	// identity; requests must then come from one of TrustedProxies with it.
	ProxyHeader    string
	TrustedProxies []netip.Prefix
	// Actor is who the audit rows name for the shared Token and for a loopback
	// console without a guard (the account that started it).
	Actor string
	// Refresh is how often live pages are re-rendered. Default DefaultRefresh.
	Refresh time.Duration
	Logger  *slog.Logger
}

// ErrUnguarded refuses a console on a non-loopback address with neither a token
// nor mTLS.
var ErrUnguarded = errors.New("coordctl: serve on a non-loopback address needs --token (or --token-file) or mTLS (--tls-cert, --tls-key, --client-ca)")

// Server is the console.
type Server struct {
	cfg   Config
	adm   *admin.Admin
	log   *slog.Logger
	keys  keys
	tls   bool
	tmpl  map[string]*template.Template
	mux   *http.ServeMux
	fails *failures
}

// New checks cfg and returns a Server over adm.
func New(adm *admin.Admin, cfg Config) (*Server, error) {
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultRefresh
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ClientCAs != nil && cfg.TLS == nil {
		return nil, errors.New("coordctl: --client-ca needs --tls-cert and --tls-key")
	}
	if err := checkTokens(cfg); err != nil {
		return nil, err
	}
	if cfg.ProxyHeader != "" && len(cfg.TrustedProxies) == 0 {
		return nil, errors.New("coordctl: --proxy-header needs --trusted-proxy: the addresses of the proxy that sets it (anyone else could)")
	}
	if !IsLoopback(cfg.Listen) && cfg.Token == "" && len(cfg.Tokens) == 0 && cfg.ClientCAs == nil && cfg.ProxyHeader == "" {
		return nil, ErrUnguarded
	}
	s := &Server{cfg: cfg, adm: adm, log: cfg.Logger, keys: newKeys(), tls: cfg.TLS != nil, fails: newFailures()}
	tmpl, err := parsePages(s.pages())
	if err != nil {
		return nil, err
	}
	s.tmpl = tmpl
	return s, nil
}

// ErrWeakToken refuses an empty or short console token.
var ErrWeakToken = fmt.Errorf("coordctl: a console token must be at least %d bytes (an empty one is refused, never taken for no authentication)", MinTokenBytes)

func checkTokens(cfg Config) error {
	if cfg.Token != "" && len(cfg.Token) < MinTokenBytes {
		return fmt.Errorf("%w: the token has %d", ErrWeakToken, len(cfg.Token))
	}
	for tok, user := range cfg.Tokens {
		if len(tok) < MinTokenBytes {
			return fmt.Errorf("%w: the token of %s has %d", ErrWeakToken, user, len(tok))
		}
		if err := checkActor(user); err != nil {
			return fmt.Errorf("coordctl: token user %q: %w", user, err)
		}
		if tok == cfg.Token {
			return fmt.Errorf("coordctl: the token of %s is also the shared token", user)
		}
	}
	return nil
}

// Handler returns the console's routes behind its guards.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /login", s.loginPage)
	mux.HandleFunc("POST /login", s.login)
	for _, p := range s.pages() {
		if !p.Static {
			mux.HandleFunc("GET "+p.Path, s.page(p.Name, p.Load))
		}
	}
	mux.HandleFunc("POST /sagas/{id}/{action}", s.sagaAction)
	mux.HandleFunc("POST /outbox/parked/{id}/{action}", s.parkedAction)
	mux.HandleFunc("POST /schedule/{tenant}/{id}/{action}", s.scheduleAction)
	mux.HandleFunc("POST /sagas/bulk/{step}", func(w http.ResponseWriter, r *http.Request) { s.bulk(w, r, "sagas") })
	mux.HandleFunc("POST /outbox/bulk/{step}", func(w http.ResponseWriter, r *http.Request) { s.bulk(w, r, "outbox") })
	mux.HandleFunc("GET /live", s.live)
	s.mux = mux
	cop := http.NewCrossOriginProtection()
	return s.guard(cop.Handler(mux))
}

// guard sets the security headers, refuses foreign Host headers on a loopback
// console, and sends an unauthenticated browser to the login form.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		if IsLoopback(s.cfg.Listen) && !loopbackHost(r.Host) {
			http.Error(w, "coordctl: this console answers to a loopback Host only", http.StatusMisdirectedRequest)
			return
		}
		open := r.URL.Path == "/login" || r.URL.Path == "/healthz" || (len(r.URL.Path) > 8 && r.URL.Path[:8] == "/static/")
		if open {
			next.ServeHTTP(w, r)
			return
		}
		tried := s.presentedCredentials(r)
		if wait, blocked := s.fails.blocked(r); blocked && tried {
			tooMany(w, wait)
			return
		}
		if _, ok := s.authenticated(r); !ok {
			if tried {
				s.fails.fail(r)
				s.log.Warn("coordctl: console authentication refused", "remote", r.RemoteAddr, "path", r.URL.Path)
			}
			if r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream" && s.guarded() && s.cfg.ProxyHeader == "" &&
				r.Header.Get("Authorization") == "" { // a browser: to the login form; a wrong bearer token: 401
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			http.Error(w, "coordctl: authentication required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Serve listens on Listen and serves until ctx ends, then shuts down (in-flight
// requests get five seconds). ready, if not nil, receives the address bound.
func (s *Server) Serve(ctx context.Context, ready chan<- string) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("coordctl: serve: %w", err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	if s.cfg.TLS != nil {
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*s.cfg.TLS}}
		if s.cfg.ClientCAs != nil {
			srv.TLSConfig.ClientCAs, srv.TLSConfig.ClientAuth = s.cfg.ClientCAs, tls.RequireAndVerifyClientCert
		}
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	scheme := "http"
	if s.tls {
		scheme = "https"
	}
	s.log.Info("coordctl: console listening", "url", scheme+"://"+ln.Addr().String(), "token", s.cfg.Token != "", "user_tokens", len(s.cfg.Tokens),
		"mtls", s.cfg.ClientCAs != nil, "proxy_header", s.cfg.ProxyHeader)
	if ready != nil {
		ready <- ln.Addr().String()
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-done
	return err
}
