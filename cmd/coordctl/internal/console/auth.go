package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/audit"
)

// Cookie names.
const (
	csrfCookie    = "coordctl_csrf"
	sessionCookie = "coordctl_session"
)

// SessionTTL is how long a session from the token login lasts.
const SessionTTL = 12 * time.Hour

// IsLoopback reports whether a listen address binds only the loopback
// interface: 127.0.0.0/8, ::1 or "localhost". ":8080" (every interface) is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackHost reports whether a request's Host names the loopback interface:
// on a loopback bind, anything else is a DNS-rebinding page in the operator's
// browser talking to the console.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// keys holds the server's per-process secret: CSRF tokens and sessions are
// HMACs under it, so a restart invalidates them.
type keys struct{ secret []byte }

func newKeys() keys {
	b := make([]byte, 32)
	rand.Read(b)
	return keys{secret: b}
}

func (k keys) mac(parts ...string) string {
	m := hmac.New(sha256.New, k.secret)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func randomToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// csrfToken returns the form token of the request's CSRF cookie, setting the
// cookie first when the request has none (double submit: the token is an HMAC
// of a value only the browser's cookie jar holds).
func (s *Server) csrfToken(w http.ResponseWriter, r *http.Request) string {
	c, err := r.Cookie(csrfCookie)
	if err != nil || len(c.Value) < 16 {
		c = &http.Cookie{Name: csrfCookie, Value: randomToken(), Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.tls}
		http.SetCookie(w, c)
		r.AddCookie(c) // later renders of this request see it
	}
	return s.keys.mac("csrf", c.Value)
}

var errCSRF = errors.New("the form's CSRF token does not match this browser's: reload the page and try again")

// checkCSRF verifies a mutating form: the token must be the HMAC of the
// request's own CSRF cookie.
func (s *Server) checkCSRF(r *http.Request) error {
	c, err := r.Cookie(csrfCookie)
	if err != nil {
		return errCSRF
	}
	if !equal(r.PostFormValue("csrf"), s.keys.mac("csrf", c.Value)) {
		return errCSRF
	}
	return nil
}

// identity is who a request is: the actor the audit rows name, and how the
// console knows it (the method, recorded in the audit row's via).
type identity struct {
	Actor  string
	Method string // mtls, proxy, token, shared token, loopback
}

// session is "issued-unix.user.mac": the login form's cookie, bound to the
// user whose token was presented ("" for the shared token).
func (s *Server) newSession(user string) string {
	at := strconv.FormatInt(time.Now().Unix(), 10)
	u := base64.RawURLEncoding.EncodeToString([]byte(user))
	return at + "." + u + "." + s.keys.mac("session", at, u)
}

func (s *Server) validSession(v string) (user string, ok bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 3 || !equal(parts[2], s.keys.mac("session", parts[0], parts[1])) {
		return "", false
	}
	n, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || time.Since(time.Unix(n, 0)) >= SessionTTL {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	return string(b), err == nil
}

// tokenUser returns the user whose token t is: a per-user token's name, "" for
// the shared token; ok false for no token of the console's.
func (s *Server) tokenUser(t string) (user string, ok bool) {
	if t == "" {
		return "", false
	}
	for tok, u := range s.cfg.Tokens { // constant time per token, every token compared
		if equal(t, tok) {
			user, ok = u, true
		}
	}
	if s.cfg.Token != "" && equal(t, s.cfg.Token) {
		user, ok = "", true
	}
	return user, ok
}

// fromToken is the identity of a token's user.
func (s *Server) fromToken(user string) identity {
	if user == "" {
		return identity{Actor: s.cfg.Actor, Method: "shared token"}
	}
	return identity{Actor: user, Method: "token"}
}

// authenticated reports whether the request may see the console, and who it
// is: the client certificate's subject (mTLS), the trusted proxy's identity
// header, the user of a bearer token or a login session, or — on a loopback
// console with no guard — the account that started it.
func (s *Server) authenticated(r *http.Request) (id identity, ok bool) {
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && s.cfg.ClientCAs != nil {
		return identity{Actor: "mtls:" + r.TLS.PeerCertificates[0].Subject.String(), Method: "mtls"}, true
	}
	if s.cfg.ProxyHeader != "" {
		v := r.Header.Get(s.cfg.ProxyHeader)
		if !s.fromTrustedProxy(r) || v == "" || checkActor(v) != nil {
			return identity{}, false
		}
		return identity{Actor: v, Method: "proxy"}, true
	}
	if !s.guarded() {
		return identity{Actor: s.cfg.Actor, Method: "loopback"}, s.cfg.ClientCAs == nil
	}
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		if u, ok := s.tokenUser(strings.TrimPrefix(h, "Bearer ")); ok {
			return s.fromToken(u), true
		}
		return identity{}, false
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		if u, ok := s.validSession(c.Value); ok {
			return s.fromToken(u), true
		}
	}
	return identity{}, false
}

// guarded reports whether the console checks tokens.
func (s *Server) guarded() bool { return s.cfg.Token != "" || len(s.cfg.Tokens) > 0 }

// presentedCredentials reports whether a request tried to authenticate (a
// bearer header, a session cookie, a proxy header): a failure of those counts
// against the client's budget; a browser arriving without any is sent to the
// login form.
func (s *Server) presentedCredentials(r *http.Request) bool {
	if r.Header.Get("Authorization") != "" {
		return true
	}
	if _, err := r.Cookie(sessionCookie); err == nil {
		return true
	}
	return s.cfg.ProxyHeader != "" && r.Header.Get(s.cfg.ProxyHeader) != ""
}

func (s *Server) fromTrustedProxy(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(ip.Unmap()) {
			return true
		}
	}
	return false
}

// login checks the login form's token (within the client's budget of
// failures) and sets a session cookie bound to its user.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	refuse := func(status int, msg string) {
		s.log.Warn("coordctl: console login refused", "remote", r.RemoteAddr, "why", msg)
		s.render(w, status, "login", "layout", pageData{Page: "login", Title: "Log in", CSRF: s.csrfToken(w, r), Now: time.Now(), Error: msg})
	}
	if wait, blocked := s.fails.blocked(r); blocked {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		refuse(http.StatusTooManyRequests, "too many failed logins: wait a minute and try again")
		return
	}
	if err := s.checkCSRF(r); err != nil {
		refuse(http.StatusForbidden, err.Error())
		return
	}
	user, ok := s.tokenUser(r.PostFormValue("token"))
	if !ok || !s.guarded() {
		s.fails.fail(r)
		refuse(http.StatusUnauthorized, "wrong token")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.newSession(user), Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: s.tls, MaxAge: int(SessionTTL.Seconds())})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// checkActor refuses an identity the audit table would not keep as given.
func checkActor(s string) error { return audit.CheckActor(s) }
