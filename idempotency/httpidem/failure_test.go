package httpidem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/idempotency/httpidem"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// logRecords is a slog.Handler keeping every record, for tests.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.recs = append(l.recs, r.Clone())
	l.mu.Unlock()
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

// text renders record i as "LEVEL msg k=v ...".
func (l *logRecords) text(i int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.recs[i]
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	return b.String()
}

func (l *logRecords) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.recs)
}

// A Store whose table was never migrated: the client gets 503 (retrying is safe)
// and the operator gets the cause in the log, once per failed request.
func TestHTTPStoreFailureIsLoggedOnce(t *testing.T) {
	db := coordtest.Postgres(t)
	store, err := idempotency.New(db.Pool, idempotency.Config{}) // no Migrate
	if err != nil {
		t.Fatal(err)
	}
	logs := &logRecords{}
	mw, err := httpidem.Middleware(store, httpidem.Config{Scope: scopeFromHeader, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw(effectHandler(t)))
	defer srv.Close()
	for i := 1; i <= 2; i++ {
		r := post(t, srv.Client(), srv.URL+"/payments", `"k-`+strconv.Itoa(i)+`"`, `{}`)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "1" {
			t.Fatalf("request %d: %d %s, want 503 with Retry-After: 1", i, r.status, r.body)
		}
		if strings.Contains(string(r.body), "does not exist") {
			t.Fatalf("the database error reached the client: %s", r.body)
		}
		if n := logs.len(); n != i {
			t.Fatalf("after %d failed requests: %d log records, want %d", i, n, i)
		}
		line := logs.text(i - 1)
		if !strings.HasPrefix(line, "ERROR ") || !strings.Contains(line, "does not exist") || !strings.Contains(line, `k-`+strconv.Itoa(i)) {
			t.Fatalf("log record %q: want an ERROR naming the key and the cause (the missing table)", line)
		}
	}
}

// The handler's buffered response is bounded: writes beyond MaxResponseBytes fail
// (the handler sees the error at once, memory stays bounded), the client gets
// 500 and nothing commits.
func TestHTTPResponseBufferIsBounded(t *testing.T) {
	const limit = 64 << 10
	e := newEnv(t, 4, idempotency.Config{MaxResponseBytes: limit})
	var (
		mu       sync.Mutex
		accepted int
		writeErr error
	)
	mw, err := httpidem.Middleware(e.store, httpidem.Config{Scope: scopeFromHeader})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := idempotency.TxFromContext(r.Context())
		if _, err := tx.Exec(r.Context(), `INSERT INTO effects (key, body) VALUES ($1, 'big')`, r.Header.Get(httpidem.HeaderName)); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		chunk := bytes.Repeat([]byte("x"), 16<<10)
		for range 64 { // 1 MiB in all
			n, err := w.Write(chunk)
			mu.Lock()
			accepted += n
			if err != nil {
				writeErr = err
			}
			mu.Unlock()
			if err != nil {
				return
			}
		}
	})))
	defer srv.Close()
	r := post(t, srv.Client(), srv.URL+"/p", `"big"`, `{}`)
	mu.Lock()
	defer mu.Unlock()
	if writeErr == nil || accepted > limit {
		t.Fatalf("handler wrote %d bytes without an error (limit %d); want a Write error at the limit", accepted, limit)
	}
	var p struct{ Type string }
	if r.status != http.StatusInternalServerError || json.Unmarshal(r.body, &p) != nil || !strings.HasSuffix(p.Type, "/response-too-large") {
		t.Fatalf("response: %d %s, want 500 response-too-large", r.status, r.body)
	}
	if n := effects(t, e, `"big"`); n != 0 {
		t.Fatalf("effects = %d, want 0: an unstorable response commits nothing", n)
	}
}
