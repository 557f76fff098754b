package httpidem_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/idempotency/httpidem"
)

// Problem details are JSON: an error text with control characters or bytes
// that are not UTF-8 (a Scope error quoting a header) must still give a body
// that decodes, with the detail intact where JSON can carry it.
func TestProblemBodyIsValidJSON(t *testing.T) {
	store, err := idempotency.New(nil, idempotency.Config{}) // the scope error answers before any query
	if err != nil {
		t.Fatal(err)
	}
	detail := "unknown tenant \a\v \xff \U000e0001"
	mw, err := httpidem.Middleware(store, httpidem.Config{Scope: func(*http.Request) (string, error) {
		return "", errors.New(detail)
	}})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/p", strings.NewReader(`{}`))
	req.Header.Set(httpidem.HeaderName, `"k1"`)
	rec := httptest.NewRecorder()
	mw(http.NotFoundHandler()).ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("status %d", rec.Code)
	}
	var p struct {
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %q is not JSON: %v", rec.Body.String(), err)
	}
	if p.Status != http.StatusBadRequest || !strings.HasPrefix(p.Detail, "unknown tenant \a\v ") {
		t.Fatalf("problem %+v", p)
	}
}
