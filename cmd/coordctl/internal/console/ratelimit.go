package console

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Budgets of failed authentications (wrong tokens, forged sessions, an
// untrusted identity header): per client address, and for the console as a
// whole (guesses spread over many addresses). Past either, the console
// answers 429 with Retry-After to every authentication attempt until the
// window has passed, without comparing the token.
const (
	authWindow           = time.Minute
	authFailuresPerIP    = 10
	authFailuresPerWorld = 100
)

// failures counts failed authentications in a sliding window.
type failures struct {
	mu    sync.Mutex
	byIP  map[string][]time.Time
	world []time.Time
}

func newFailures() *failures { return &failures{byIP: map[string][]time.Time{}} }

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func recent(ts []time.Time, now time.Time) []time.Time {
	i := 0
	for i < len(ts) && now.Sub(ts[i]) >= authWindow {
		i++
	}
	return ts[i:]
}

// blocked reports whether r's client (or the console) spent its budget, and
// how long until the oldest failure leaves the window.
func (f *failures) blocked(r *http.Request) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	ip := clientIP(r)
	f.byIP[ip] = recent(f.byIP[ip], now)
	f.world = recent(f.world, now)
	switch {
	case len(f.byIP[ip]) >= authFailuresPerIP:
		return authWindow - now.Sub(f.byIP[ip][0]), true
	case len(f.world) >= authFailuresPerWorld:
		return authWindow - now.Sub(f.world[0]), true
	}
	if len(f.byIP[ip]) == 0 {
		delete(f.byIP, ip)
	}
	return 0, false
}

// fail records a failed authentication of r's client.
func (f *failures) fail(r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	ip := clientIP(r)
	f.byIP[ip] = append(recent(f.byIP[ip], now), now)
	f.world = append(recent(f.world, now), now)
}

// tooMany answers a client past its budget.
func tooMany(w http.ResponseWriter, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
	http.Error(w, "coordctl: too many failed authentications: wait and try again", http.StatusTooManyRequests)
}
