package view_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/view"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var (
	t0   = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)
	t1   = t0.Add(10 * time.Minute)
	tp   = &t1
	lag  = 1.25
	zero = 0.0
)

// fixtures are one value of every model a command prints, as the commands
// build them; the golden files pin both renderings.
var fixtures = map[string]struct {
	v   any
	doc view.Doc
}{}

func init() {
	lease := admin.Lease{Tenant: "acme", Name: "billing-leader", Lease: "/tenants/acme/elections/billing-leader", Held: true,
		Holder: "billing-7d9f pid 4242", HolderLeaseID: "694d8f3a2c1b0e07", Token: "/tenants/acme/elections/billing-leader@1207",
		SinceRevision: 1207, TTLSeconds: 13, Waiters: 1, FenceHighest: 1207, Revision: 1311,
		Queue: []admin.QueueEntry{
			{Position: 0, Key: "/tenants/acme/elections/billing-leader/694d8f3a2c1b0e07", LeaseID: "694d8f3a2c1b0e07", Session: "billing-7d9f pid 4242", CreateRevision: 1207, TTLSeconds: 13},
			{Position: 1, Key: "/tenants/acme/elections/billing-leader/694d8f3a2c1b0e2a", LeaseID: "694d8f3a2c1b0e2a", Session: "billing-5c2e pid 977", CreateRevision: 1290, TTLSeconds: 14},
		}}
	unheld := admin.Lease{Tenant: "globex", Name: "reindex", Lease: "/tenants/globex/elections/reindex", FenceHighest: -1, TTLSeconds: -1, Revision: 1311}
	stale := lease
	stale.Name, stale.FenceHighest, stale.Queue = "ledger", 9223372036854775807, nil
	fixtures["leases-list"] = struct {
		v   any
		doc view.Doc
	}{[]admin.Lease{lease, unheld, stale}, view.Leases([]admin.Lease{lease, unheld, stale})}
	fixtures["leases-get"] = fx(lease, view.Lease(lease))
	fixtures["leases-get-stale"] = fx(stale, view.Lease(stale))
	fixtures["leases-list-empty"] = fx([]admin.Lease{}, view.Leases(nil))

	fence := admin.Fence{Lease: "/tenants/acme/elections/billing-leader", Highest: 1207, UpdatedAt: t0, Version: "1207",
		Resets: []admin.FenceReset{{ID: 3, At: t1, Actor: "alice@oncall", Reason: "INC-42: forged token\nfrom a test box", Before: 9223372036854775807, After: 0}}}
	fixtures["fences-list"] = fx([]admin.Fence{fence}, view.Fences([]admin.Fence{fence}))
	fixtures["fences-get"] = fx(fence, view.Fence(fence))

	st := admin.OutboxStatus{Pending: 1834, OldestPendingAgeSeconds: 312.5, PublishLagP99Seconds: lag, PublishedInWindow: 90210, WindowSeconds: 300, Parked: 2,
		ParkedKeys: []admin.ParkedKey{{Key: "order-1001", Parked: 2, Blocked: 5, ParkedAt: t0}}}
	fixtures["outbox-status"] = fx(st, view.OutboxStatus(st))
	p := admin.ParkedEvent{ID: "01a2313f-1c36-78e7-8cca-bb959dcad1a3", Seq: 88123, Topic: "orders", Key: "order-1001", Type: "order.invoice_attached",
		Attempts: 10, LastError: "broker: message too large\x1b[31m (ANSI in an error text)", CreatedAt: t0, ParkedAt: t1, PayloadBytes: 45,
		Payload: `{"order":"1001"}`, Headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, Version: "98ea22148c3a"}
	fixtures["outbox-parked-list"] = fx([]admin.ParkedEvent{p}, view.Parked([]admin.ParkedEvent{p}))

	sg := admin.Saga{ID: "order-1001", Type: "order", State: "running", Step: 1, StepName: "charge-card", StepCount: 4, PivotStep: 2, Attempts: 3,
		NextAttemptAt: t1, LastError: "payment provider: 503 Service Unavailable", CreatedAt: t0, UpdatedAt: t0, StateSince: t0, AgeSeconds: 4521,
		ClaimOwner: "", Version: "e642bed1d717",
		Steps: []admin.SagaStep{
			{Index: 0, Name: "reserve-stock", Kind: "compensatable", Status: "done"},
			{Index: 1, Name: "charge-card", Kind: "compensatable", Status: "current", Failures: 3, LastError: "payment provider: 503 Service Unavailable"},
			{Index: 2, Name: "ship", Kind: "pivot", Status: "pending"},
			{Index: 3, Name: "email-receipt", Kind: "retriable", Status: "pending"},
		},
		Errors: []admin.SagaError{{At: t0, Step: "charge-card", Error: "payment provider: 503 Service Unavailable"}, {At: t1, Step: "charge-card", Error: "payment provider: timeout"}},
		Data:   json.RawMessage(`{"order":"1001","cents":4999}`)}
	human := admin.Saga{ID: "transfer-77", Type: "transfer", State: "needs_human", Step: 0, StepName: "debit", StepCount: 3, PivotStep: 2, Attempts: 3,
		LastError: "ledger: account 4411 is locked", Failure: "saga: business failure: insufficient funds", CreatedAt: t0, UpdatedAt: t1, StateSince: t1,
		AgeSeconds: 60, PivotAt: nil, Version: "62f38bfe5f2d"}
	list := sg
	list.Steps, list.Errors, list.Data = nil, nil, nil
	fixtures["saga-list"] = fx([]admin.Saga{list, human}, view.Sagas([]admin.Saga{list, human}))
	fixtures["saga-get"] = fx(sg, view.Saga(sg))
	done := human
	done.State, done.PivotAt = "completed", tp
	fixtures["saga-get-completed"] = fx(done, view.Saga(done))

	idem := admin.IdemKey{Scope: "acme", Key: "pay-7f3a", State: "completed", Fingerprint: "d03e7a35e79a5f172db6708770e035234c7c62864391fd3032927dc194b97f32",
		RecoveryPoint: "started", ResponseStatus: 201, ResponseHeader: http.Header{"Location": {"/payments/981"}, "Content-Type": {"application/json"}},
		ResponseBytes: 10, CreatedAt: t0, CompletedAt: tp, ExpiresAt: t0.Add(24 * time.Hour)}
	fixtures["idem-get"] = fx(idem, view.Idem(idem))

	cfg := admin.ConfigRead{Revision: 1311, Entries: []admin.ConfigEntry{
		{Key: "/tenants/acme/config/checkout", Value: `{"new_checkout":true}`, Encoding: "utf-8", Bytes: 21, CreateRevision: 100, ModRevision: 1200, Version: 7},
		{Key: "/tenants/acme/config/blob", Value: "/w==", Encoding: "base64", Bytes: 2, CreateRevision: 101, ModRevision: 101, Version: 1},
	}}
	fixtures["config-get"] = fx(cfg, view.Config(cfg))
	stl := admin.Staleness{Path: "/var/lib/checkout/config.state", Watched: "/tenants/acme/config/", Prefix: true, Revision: 1199, Keys: 2,
		Confirmed: t0, StalenessSeconds: 3600, EtcdModRevision: 1200, EtcdKeys: 2, Behind: true}
	fixtures["config-staleness"] = fx(stl, view.Staleness(stl))

	members := []admin.Service{
		{Tenant: "acme", Service: "checkout", Revision: 1311, Members: []admin.Member{
			{Instance: "checkout-7d9f", Addr: "10.0.0.7:8080", Metadata: map[string]string{"zone": "eu-west-1a", "version": "v1.42.0"}, LeaseID: "694d8f3a2c1b0e07", SinceRevision: 1207, ModRevision: 1290},
			{Instance: "checkout-b3e1", Addr: "10.0.0.9:8080", Metadata: map[string]string{}, LeaseID: "694d8f3a2c1b0e2a", SinceRevision: 1300, ModRevision: 1300},
		}, Malformed: []string{"/tenants/acme/members/checkout/debug/extra"}},
		{Tenant: "acme", Service: "worker", Revision: 1311, Members: []admin.Member{
			{Instance: "w\x1b[31m1", Metadata: map[string]string{"note": "tab\there"}, LeaseID: "694d8f3a2c1b0f00", SinceRevision: 1301, ModRevision: 1301},
		}},
	}
	fixtures["members"] = fx(members, view.Members(members))
	fixtures["members-empty"] = fx([]admin.Service{}, view.Members(nil))
	emptySvc := []admin.Service{{Tenant: "acme", Service: "billing", Members: []admin.Member{}, Revision: 1311}}
	fixtures["members-service-empty"] = fx(emptySvc, view.Members(emptySvc))

	part := func(p int, owner, target string, rev int64, waiting int) admin.PartitionOwner {
		lease := "/tenants/acme/elections/ownership.invoices." + itoa(int64(p))
		po := admin.PartitionOwner{Partition: p, Owner: owner, Target: target, Lease: lease, Waiting: waiting}
		if owner != "" {
			po.Token, po.SinceRevision = lease+"@"+itoa(rev), rev
		}
		return po
	}
	om := []admin.OwnershipMap{
		{Tenant: "acme", Group: "invoices", Partitions: 4, Unowned: 1, Moving: 2, TargetRevision: 1290, Revision: 1311,
			Members: []admin.OwnershipOwner{{ID: "694d8f3a2c1b0e07", Owns: 2, Metadata: map[string]string{"zone": "eu-west-1a"}},
				{ID: "694d8f3a2c1b0e2a", Owns: 1, Metadata: map[string]string{}}},
			Owners: []admin.PartitionOwner{part(0, "694d8f3a2c1b0e07", "694d8f3a2c1b0e07", 1207, 0), part(1, "694d8f3a2c1b0e07", "694d8f3a2c1b0e2a", 1208, 1),
				part(2, "694d8f3a2c1b0e2a", "694d8f3a2c1b0e2a", 1300, 0), part(3, "", "694d8f3a2c1b0f00", 0, 0)}},
		{Tenant: "acme", Group: "new", Members: []admin.OwnershipOwner{}, Owners: []admin.PartitionOwner{}, Revision: 1311},
	}
	fixtures["ownership-map"] = fx(om, view.Ownership(om))
	fixtures["ownership-map-empty"] = fx([]admin.OwnershipMap{}, view.Ownership(nil))

	ptr := func(n int) *int { return &n }
	one := int64(1)
	ov := admin.Overview{At: t1, LeasesHeld: ptr(12), LeasesWaiting: ptr(4), Members: ptr(3), Services: ptr(2), FenceRejectionsLastHour: &zero, FenceRejectionsSource: "http://prometheus:9090",
		Outbox: &st, Sagas: []admin.SagaSummary{{Type: "order", State: "running", Count: 31, OldestSince: t0, OldestAgeSeconds: 4521},
			{Type: "transfer", State: "needs_human", Count: 1, OldestSince: t1, OldestAgeSeconds: 60}}, NeedsHuman: &one}
	fixtures["overview"] = fx(ov, view.Overview(ov))
	// etcd unreadable (leases, members) and PostgreSQL unreadable (outbox, sagas): every figure unknown, none zero.
	partial := admin.Overview{At: t1, FenceRejectionsSource: "not configured (--prometheus)",
		Errors: map[string]string{"leases": "coordctl: etcd 127.0.0.1:2379: context deadline exceeded", "members": "coordctl: etcd 127.0.0.1:2379: context deadline exceeded",
			"outbox": "outbox: status: dial tcp 127.0.0.1:5432: connect: connection refused", "sagas": "saga: count: dial tcp 127.0.0.1:5432: connect: connection refused"}}
	fixtures["overview-partial"] = fx(partial, view.Overview(partial))

	audit := []admin.AuditEntry{{ID: 7, At: t1, Actor: "alice@oncall", Via: "console 127.0.0.1:51234", DBUser: "ops", Action: "saga.retry",
		Target: "order-1001", Reason: "provider recovered", Outcome: "applied", Before: json.RawMessage(`{"state":"running"}`), After: json.RawMessage(`{"state":"running"}`)}}
	fixtures["audit-list"] = fx(audit, view.Audit(audit))

	ch := admin.Change{Action: "saga.retry", Target: "order-1001", Before: list, After: list, AuditID: 7, At: t1}
	fixtures["saga-retry"] = fx(ch, view.Change(ch, view.Saga(list)[:1], view.Saga(list)[:1]))
	dry := ch
	dry.DryRun, dry.AuditID, dry.At = true, 0, time.Time{}
	fixtures["saga-retry-dry-run"] = fx(dry, view.Change(dry, view.Saga(list)[:1], view.Saga(list)[:1]))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func fx(v any, doc view.Doc) struct {
	v   any
	doc view.Doc
} {
	return struct {
		v   any
		doc view.Doc
	}{v, doc}
}

// TestGolden pins every command's table and JSON output. Run with -update to
// rewrite testdata/ after an intended change, and review the diff.
func TestGolden(t *testing.T) {
	for name, f := range fixtures {
		t.Run(name, func(t *testing.T) {
			var table, js bytes.Buffer
			if err := view.Write(&table, f.doc); err != nil {
				t.Fatal(err)
			}
			if err := view.JSON(&js, f.v); err != nil {
				t.Fatal(err)
			}
			check(t, name+".table", table.Bytes())
			check(t, name+".json", js.Bytes())
		})
	}
}

func check(t *testing.T, file string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", file)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/view -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./internal/view -update rewrites it; review the diff):\n--- got\n%s\n--- want\n%s", file, got, want)
	}
}
