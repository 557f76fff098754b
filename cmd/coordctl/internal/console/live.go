package console

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// live streams a page's live region as server-sent events: every Refresh it
// renders the page's fragment and sends it when it changed ("update" events,
// the HTML as data lines). The page's script swaps it in unless the operator is
// typing in one of its forms.
func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Query().Get("path")
	u, err := url.Parse(path)
	if err != nil || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") || u.Path == "/live" || u.Host != "" {
		http.Error(w, "coordctl: live: bad path", http.StatusBadRequest)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "coordctl: live: streaming unsupported", http.StatusInternalServerError)
		return
	}
	q := u.Query()
	q.Set("fragment", "1")
	u.RawQuery = q.Encode()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	fmt.Fprintf(w, "retry: %d\n\n", s.cfg.Refresh.Milliseconds())
	fl.Flush()
	var last [32]byte
	tick := time.NewTicker(s.cfg.Refresh)
	defer tick.Stop()
	for {
		inner, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u.String(), nil)
		if err != nil {
			return
		}
		inner.Header = r.Header.Clone()
		inner.Header.Del("Accept")
		inner.RemoteAddr, inner.Host, inner.TLS = r.RemoteAddr, r.Host, r.TLS
		rec := &buffer{header: http.Header{}}
		s.mux.ServeHTTP(rec, inner)
		if sum := sha256.Sum256(rec.body.Bytes()); rec.status == http.StatusOK && sum != last {
			last = sum
			var b strings.Builder
			b.WriteString("event: update\n")
			for _, line := range strings.Split(rec.body.String(), "\n") {
				b.WriteString("data: " + line + "\n")
			}
			b.WriteString("\n")
			if _, err := w.Write([]byte(b.String())); err != nil {
				return
			}
			fl.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// buffer is an in-memory http.ResponseWriter for the live fragment.
type buffer struct {
	header http.Header
	body   bytes.Buffer
	status int
}

// Header returns the response headers.
func (b *buffer) Header() http.Header { return b.header }

// Write appends to the body (status 200 unless set).
func (b *buffer) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// WriteHeader records the status.
func (b *buffer) WriteHeader(code int) { b.status = code }
