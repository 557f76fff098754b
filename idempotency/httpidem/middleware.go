package httpidem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/idempotency"
)

// Middleware returns net/http middleware that makes the protected methods
// idempotent with store. Per request: it parses Idempotency-Key (400 when missing
// or invalid), reads the body (413 beyond MaxBodyBytes; 400 for a JSON body that is
// invalid or not UTF-8), fingerprints method, path, query and the canonical body,
// and calls Store.Do. The handler runs inside Do's transaction, which it gets with
// idempotency.TxFromContext, and may read r.Body as usual (the middleware hands it
// the bytes it read); its response is buffered (at most MaxResponseBytes), stored
// with the key and then written. A completed key replays the stored status, ReplayHeaders and body with
// "Idempotent-Replayed: true"; a different request with the key is 422; a
// duplicate in flight is 409 with Retry-After; a database failure or an unknown
// commit outcome is 503 with Retry-After (retrying with the key is safe), and its
// cause goes to Logger, once per request.
//
// The handler must not hijack the connection or stream: its output is buffered. It
// returns a *ConfigError for a nil store, a missing Scope or a negative
// MaxBodyBytes or MaxResponseBytes.
func Middleware(store *idempotency.Store, cfg Config) (func(http.Handler) http.Handler, error) {
	if store == nil {
		return nil, &ConfigError{Field: "store", Reason: "nil"}
	}
	o := cfg.withDefaults(store)
	if err := o.validate(); err != nil {
		return nil, err
	}
	methods := map[string]bool{}
	for _, m := range o.Methods {
		methods[strings.ToUpper(m)] = true
	}
	m := &mw{store: store, o: o, methods: methods}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
	}, nil
}

type mw struct {
	store   *idempotency.Store
	o       Config
	methods map[string]bool
}

var errNotStored = errors.New("httpidem: response not stored")

func (m *mw) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if !m.methods[r.Method] {
		next.ServeHTTP(w, r)
		return
	}
	vals := r.Header.Values(HeaderName)
	if len(vals) == 0 && m.o.Optional {
		next.ServeHTTP(w, r)
		return
	}
	id, err := ParseKey(vals, m.o.Strict)
	if err != nil {
		problem(w, http.StatusBadRequest, "invalid-idempotency-key", err.Error())
		return
	}
	scope, err := m.o.Scope(r)
	if err != nil {
		problem(w, http.StatusBadRequest, "no-scope", err.Error())
		return
	}
	key := idempotency.Key{Scope: scope, ID: id}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, m.o.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			problem(w, http.StatusRequestEntityTooLarge, "body-too-large", fmt.Sprintf("request body exceeds %d bytes", m.o.MaxBodyBytes))
			return
		}
		problem(w, http.StatusBadRequest, "body-unreadable", err.Error())
		return
	}
	fp, err := fingerprint(r, body)
	if err != nil {
		problem(w, http.StatusBadRequest, "invalid-body", err.Error())
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := &recorder{header: http.Header{}, max: m.o.MaxResponseBytes}
	res, err := m.store.Do(r.Context(), key, fp, func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		next.ServeHTTP(rec, r.WithContext(idempotency.ContextWithTx(ctx, tx)))
		if rec.overflow() {
			return idempotency.Response{}, fmt.Errorf("%w: more than %d bytes of body", idempotency.ErrResponseTooLarge, m.o.MaxResponseBytes)
		}
		if !m.o.Store(rec.statusCode()) {
			return idempotency.Response{}, errNotStored
		}
		return rec.response(m.o.ReplayHeaders), nil
	}, nil)
	var (
		me  *idempotency.MismatchError
		ife *idempotency.InFlightError
		ke  *idempotency.KeyError
	)
	switch {
	case err == nil && res.Replayed:
		writeReplay(w, res.Response)
	case err == nil, errors.Is(err, errNotStored):
		rec.writeTo(w)
	case errors.As(err, &me):
		problem(w, http.StatusUnprocessableEntity, "idempotency-key-reused", "this Idempotency-Key was used with a different request")
	case errors.As(err, &ife):
		w.Header().Set("Retry-After", strconv.Itoa(int(ife.RetryAfter.Seconds())))
		problem(w, http.StatusConflict, "request-in-progress", "a request with this Idempotency-Key is in progress")
	case errors.As(err, &ke):
		problem(w, http.StatusBadRequest, "invalid-idempotency-key", err.Error())
	case errors.Is(err, idempotency.ErrResponseTooLarge):
		m.o.Logger.ErrorContext(r.Context(), "httpidem: response too large to store; answered 500, nothing committed",
			"key", key.String(), "method", r.Method, "path", r.URL.Path, "err", err)
		problem(w, http.StatusInternalServerError, "response-too-large", "the response is too large to store; nothing was committed")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		problem(w, http.StatusServiceUnavailable, "cancelled", "the request was cancelled; retry with the same Idempotency-Key")
	default: // database unavailable, unknown commit outcome: retrying with the key is safe
		m.o.Logger.ErrorContext(r.Context(), "httpidem: idempotency store failed; answered 503",
			"key", key.String(), "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "1")
		problem(w, http.StatusServiceUnavailable, "unavailable", "retry with the same Idempotency-Key")
	}
}

// fingerprint hashes method, path with query, and the body: canonical JSON for a
// JSON content type, raw bytes otherwise.
func fingerprint(r *http.Request, body []byte) (idempotency.Fingerprint, error) {
	target := r.URL.RequestURI()
	if isJSON(r.Header.Get("Content-Type")) {
		return idempotency.FingerprintJSON(r.Method, target, body)
	}
	return idempotency.FingerprintOf([]byte(r.Method), []byte(target), body), nil
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

func writeReplay(w http.ResponseWriter, resp idempotency.Response) {
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	h.Set(ReplayedHeader, "true")
	h.Set("Content-Length", strconv.Itoa(len(resp.Body)))
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(resp.Body)
}

func problem(w http.ResponseWriter, status int, typ, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	// JSON strings, not Go-quoted ones (%q writes \a, \xff and \U escapes that
	// JSON does not have); invalid UTF-8 becomes U+FFFD.
	b, _ := json.Marshal(struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{"https://coordkit.dev/problems/" + typ, http.StatusText(status), status, detail})
	_, _ = w.Write(append(b, '\n'))
}

// recorder buffers a handler's response, at most max bytes of body.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	max    int
	full   bool // a Write exceeded max
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

// Write buffers b, or as much of it as fits under max and an error matching
// idempotency.ErrResponseTooLarge.
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if room := r.max - r.body.Len(); len(b) > room {
		r.full = true
		n, _ := r.body.Write(b[:max(room, 0)])
		return n, fmt.Errorf("%w: the response body exceeds httpidem.Config.MaxResponseBytes (%d)", idempotency.ErrResponseTooLarge, r.max)
	}
	return r.body.Write(b)
}

// overflow reports whether a Write was refused for exceeding max.
func (r *recorder) overflow() bool { return r.full }

func (r *recorder) statusCode() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

func (r *recorder) response(keep []string) idempotency.Response {
	h := http.Header{}
	for _, k := range keep {
		if v := r.header.Values(k); len(v) > 0 {
			h[http.CanonicalHeaderKey(k)] = v
		}
	}
	return idempotency.Response{Status: r.statusCode(), Header: h, Body: bytes.Clone(r.body.Bytes())}
}

func (r *recorder) writeTo(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range r.header {
		h[k] = v
	}
	h.Set("Content-Length", strconv.Itoa(r.body.Len()))
	w.WriteHeader(r.statusCode())
	_, _ = w.Write(r.body.Bytes())
}
