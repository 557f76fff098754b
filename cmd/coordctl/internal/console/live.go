package console

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// live streams a page's live region as server-sent events. Every Refresh it
// renders the region and sends only what changed since the last render:
//
//   - "full": the whole region (the first render when its skeleton differs from
//     the page's own, or when the skeleton or its set of parts changed);
//   - "parts": a JSON object of the parts (rows, cards, the pager: marked in the
//     templates) whose HTML changed, by key — on the first render that differs
//     from the page's own but keeps its skeleton, every part: the skeleton, and
//     the forms in it, stay as the operator has them;
//   - "ok": nothing changed; the data is confirmed current as of now;
//   - "stale": the region could not be read (the page's error and status as
//     JSON): the page keeps what it shows, marked stale with the error, until a
//     render succeeds again.
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
	var last *region
	baseline := r.URL.Query().Get("digest")   // the page's own render: nothing to send if unchanged
	skeleton := r.URL.Query().Get("skeleton") // the page's skeleton: only its parts to send while it holds
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
		var event, data string
		switch {
		case rec.status != http.StatusOK:
			msg := rec.header.Get("X-Coordctl-Error")
			if msg == "" {
				msg = http.StatusText(rec.status)
			}
			b, _ := json.Marshal(map[string]any{"error": msg, "status": rec.status})
			event, data = "stale", string(b)
		default:
			reg := splitRegion(rec.body.Bytes())
			switch {
			case last == nil && baseline != "" && digest(rec.body.Bytes()) == baseline:
				event = "ok"
			case last == nil && skeleton != "" && digest([]byte(reg.skeleton)) == skeleton:
				// The page has this skeleton: its parts replace the page's,
				// and its forms (in the skeleton) stay as the operator left them.
				b, _ := json.Marshal(reg.parts)
				event, data = "parts", string(b)
			case last == nil || reg.skeleton != last.skeleton:
				event, data = "full", rec.body.String()
			default:
				changed := map[string]string{}
				for k, h := range reg.parts {
					if last.sums[k] != reg.sums[k] {
						changed[k] = h
					}
				}
				event = "ok"
				if len(changed) > 0 {
					b, _ := json.Marshal(changed)
					event, data = "parts", string(b)
				}
			}
			last = &reg
		}
		if _, err := w.Write(sse(event, data)); err != nil {
			return
		}
		fl.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// sse is one server-sent event.
func sse(event, data string) []byte {
	var b bytes.Buffer
	b.WriteString("event: " + event + "\n")
	for _, line := range strings.Split(data, "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	return b.Bytes()
}

// region is a rendered live region split into its parts: the skeleton (the
// HTML outside every part, with the parts' markers: it changes when a part
// comes or goes) and each part's HTML and digest by key.
type region struct {
	skeleton string
	parts    map[string]string
	sums     map[string][32]byte
}

// splitRegion finds the parts marked <!--p:KEY-->…<!--/p-->. Markers come only
// from the templates (html/template escapes every "<" of the data), and parts
// do not nest.
func splitRegion(b []byte) region {
	r := region{parts: map[string]string{}, sums: map[string][32]byte{}}
	var skel strings.Builder
	s := string(b)
	for {
		i := strings.Index(s, "<!--p:")
		if i < 0 {
			skel.WriteString(s)
			break
		}
		j := strings.Index(s[i:], "-->")
		k := strings.Index(s[i:], string(partEnd))
		if j < 0 || k < 0 || k < j {
			skel.WriteString(s)
			break
		}
		key := s[i+len("<!--p:") : i+j]
		body := s[i+j+len("-->") : i+k]
		skel.WriteString(s[:i+j+len("-->")])
		skel.WriteString(string(partEnd))
		r.parts[key] = body
		r.sums[key] = sha256.Sum256([]byte(body))
		s = s[i+k+len(partEnd):]
	}
	r.skeleton = skel.String()
	return r
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
