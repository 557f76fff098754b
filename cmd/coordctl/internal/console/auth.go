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
	"strconv"
	"strings"
	"time"
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

// session is "issued-unix.mac".
func (s *Server) newSession() string {
	at := strconv.FormatInt(time.Now().Unix(), 10)
	return at + "." + s.keys.mac("session", at)
}

func (s *Server) validSession(v string) bool {
	at, mac, ok := strings.Cut(v, ".")
	if !ok || !equal(mac, s.keys.mac("session", at)) {
		return false
	}
	n, err := strconv.ParseInt(at, 10, 64)
	return err == nil && time.Since(time.Unix(n, 0)) < SessionTTL
}

// authenticated reports whether the request may see the console, and who it is.
func (s *Server) authenticated(r *http.Request) (actor string, ok bool) {
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && s.cfg.ClientCAs != nil {
		return "mtls:" + r.TLS.PeerCertificates[0].Subject.CommonName, true
	}
	if s.cfg.Token == "" {
		return s.cfg.Actor, s.cfg.ClientCAs == nil // loopback without a token, or mTLS (checked by TLS)
	}
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") && equal(strings.TrimPrefix(h, "Bearer "), s.cfg.Token) {
		return s.cfg.Actor, true
	}
	if c, err := r.Cookie(sessionCookie); err == nil && s.validSession(c.Value) {
		return s.cfg.Actor, true
	}
	return "", false
}
