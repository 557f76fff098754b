package admin_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
)

// TestOverviewFenceRejectionsFromPrometheus reads the overview's fence
// rejections through Prometheus's query API (a stand-in server that checks
// the query coordctl sends), and names each part it could not read.
func TestOverviewFenceRejectionsFromPrometheus(t *testing.T) {
	var got string
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.Query().Get("query")
		if r.URL.Path != "/api/v1/query" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1710408413.2,"3"]}]}}`))
	}))
	defer prom.Close()
	a, err := admin.New(admin.Config{Prometheus: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	o, blind := a.Overview(context.Background())
	if got != admin.FenceRejectionsQuery {
		t.Fatalf("query %q, want %q", got, admin.FenceRejectionsQuery)
	}
	if o.FenceRejectionsLastHour == nil || *o.FenceRejectionsLastHour != 3 {
		t.Fatalf("fence rejections %v, want 3", o.FenceRejectionsLastHour)
	}
	for _, part := range []string{"leases", "members", "outbox", "sagas"} {
		if o.Errors[part] == "" {
			t.Errorf("overview with no etcd or PostgreSQL does not say %s is unavailable: %v", part, o.Errors)
		}
	}
	if !errors.Is(blind, admin.ErrPartial) || o.LeasesHeld != nil || o.NeedsHuman != nil || o.Members != nil {
		t.Errorf("overview with no etcd or PostgreSQL: %v, leases %v, needs_human %v: want unknown (nil) figures and ErrPartial", blind, o.LeasesHeld, o.NeedsHuman)
	}
	if _, err := a.Sagas(context.Background(), admin.SagaFilter{}); !errors.Is(err, admin.ErrNoDB) {
		t.Fatalf("Sagas without a database = %v, want ErrNoDB", err)
	}

	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"error","error":"query timed out"}`))
	}))
	defer down.Close()
	b, _ := admin.New(admin.Config{Prometheus: down.URL})
	defer b.Close()
	if o, _ := b.Overview(context.Background()); o.FenceRejectionsLastHour != nil || o.Errors["fence_rejections"] == "" {
		t.Fatalf("a failing Prometheus: %v %v", o.FenceRejectionsLastHour, o.Errors)
	}
}
