package grpcidem_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/idempotency/grpcidem"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const method = "/test.Payments/Charge"

// chargeService is a hand-written service descriptor (no codegen): Charge takes a
// StringValue (the amount) and answers a StringValue (the charge id), writing one
// charges row in the interceptor's transaction.
func chargeService(pool *pgxpool.Pool) *grpc.ServiceDesc {
	type server interface{}
	return &grpc.ServiceDesc{
		ServiceName: "test.Payments",
		HandlerType: (*server)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Charge",
			Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.StringValue)
				if err := dec(in); err != nil {
					return nil, err
				}
				h := func(ctx context.Context, req any) (any, error) {
					tx, ok := idempotency.TxFromContext(ctx)
					if !ok {
						return nil, status.Error(codes.Internal, "no tx")
					}
					if req.(*wrapperspb.StringValue).Value == "fail" {
						tx.Exec(ctx, `INSERT INTO charges (amount) VALUES ('fail')`)
						return nil, status.Error(codes.Unavailable, "provider down")
					}
					var id string
					if err := tx.QueryRow(ctx, `INSERT INTO charges (amount) VALUES ($1) RETURNING 'ch_' || id`, req.(*wrapperspb.StringValue).Value).Scan(&id); err != nil {
						return nil, err
					}
					time.Sleep(5 * time.Millisecond)
					return wrapperspb.String(id), nil
				}
				return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: method}, h)
			},
		}},
	}
}

type env struct {
	pool   *pgxpool.Pool
	store  *idempotency.Store
	client *grpc.ClientConn
}

func newEnv(t *testing.T) *env {
	db := coordtest.Postgres(t)
	ctx := context.Background()
	store, err := idempotency.New(db.Pool, idempotency.Config{WaitTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE charges (id serial PRIMARY KEY, amount text)`); err != nil {
		t.Fatal(err)
	}
	return &env{pool: db.Pool, store: store, client: serve(t, db.Pool, store, grpcidem.Config{})}
}

// serve starts a gRPC server of chargeService behind the interceptor (the scope from
// the "tenant" metadata, default "default") and returns a client of it.
func serve(t *testing.T, pool *pgxpool.Pool, store *idempotency.Store, cfg grpcidem.Config) *grpc.ClientConn {
	cfg.Scope = func(ctx context.Context, _ string) (string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("tenant"); len(v) == 1 {
			return v[0], nil
		}
		return "default", nil
	}
	icpt, err := grpcidem.UnaryServerInterceptor(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(icpt))
	srv.RegisterService(chargeService(pool), struct{}{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient("passthrough:///"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func (e *env) charge(key, amount string, kv ...string) (string, metadata.MD, metadata.MD, error) {
	ctx := context.Background()
	if key != "" {
		kv = append(kv, grpcidem.MetadataKey, key)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	out := new(wrapperspb.StringValue)
	var hdr, trl metadata.MD
	err := e.client.Invoke(ctx, method, wrapperspb.String(amount), out, grpc.Header(&hdr), grpc.Trailer(&trl))
	return out.GetValue(), hdr, trl, err
}

func (e *env) charges(t *testing.T) int {
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM charges`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestInterceptorSemantics(t *testing.T) {
	e := newEnv(t)
	id, hdr, _, err := e.charge("k1", "100")
	if err != nil || id != "ch_1" || len(hdr.Get(grpcidem.ReplayedKey)) != 0 {
		t.Fatalf("first: %q %v %v", id, hdr, err)
	}
	id2, hdr, _, err := e.charge("k1", "100")
	if err != nil || id2 != id || hdr.Get(grpcidem.ReplayedKey)[0] != "true" {
		t.Fatalf("replay: %q %v %v", id2, hdr, err)
	}
	if _, _, _, err := e.charge("k1", "200"); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("mismatch: %v", err)
	}
	if _, _, _, err := e.charge("", "100"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("missing key: %v", err)
	}
	if _, _, _, err := e.charge("bad\x01key", "100"); status.Code(err) == codes.OK {
		t.Fatalf("invalid key accepted")
	}
	if _, _, _, err := e.charge("k1", "100", "tenant", "other"); err != nil {
		t.Fatalf("other tenant: %v", err)
	}
	// A handler error rolls back: nothing stored, the retry runs again.
	if _, _, _, err := e.charge("k2", "fail"); status.Code(err) != codes.Unavailable {
		t.Fatalf("handler error: %v", err)
	}
	if n := e.charges(t); n != 2 {
		t.Fatalf("charges = %d, want 2", n)
	}
	// In flight: a transaction holds the key uncommitted.
	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// The interceptor's fingerprint: method + deterministic request bytes; any
	// fingerprint works here since the in-flight answer comes before the comparison.
	if _, err := e.store.DoTx(ctx, tx, idempotency.Key{Scope: "default", ID: "k3"}, idempotency.FingerprintOf(), func(context.Context, pgx.Tx) (idempotency.Response, error) {
		return idempotency.Response{}, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	_, _, trl, err := e.charge("k3", "100")
	if status.Code(err) != codes.Aborted || len(trl.Get("retry-after")) != 1 {
		t.Fatalf("in flight: %v, trailer %v", err, trl)
	}
	var retry *errdetails.RetryInfo
	for _, d := range status.Convert(err).Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			retry = r
		}
	}
	if retry == nil || retry.GetRetryDelay().AsDuration() < time.Second {
		t.Fatalf("no RetryInfo ≥ 1s in %v", status.Convert(err).Details())
	}
}

func TestInterceptorConcurrentSameKey(t *testing.T) {
	e := newEnv(t)
	const n = 30
	var wg sync.WaitGroup
	ids := make([]string, n)
	errs := make([]error, n)
	gate := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-gate
			ids[i], _, _, errs[i] = e.charge("same", "1")
		})
	}
	close(gate)
	coordtest.Wait(t, &wg, 60*time.Second, "the concurrent calls with one key")
	ok, aborted := 0, 0
	for i := range n {
		switch status.Code(errs[i]) {
		case codes.OK:
			ok++
			if ids[i] != "ch_1" {
				t.Fatalf("reply %q, want ch_1", ids[i])
			}
		case codes.Aborted:
			aborted++
		default:
			t.Fatalf("unexpected %v", errs[i])
		}
	}
	if c := e.charges(t); c != 1 {
		t.Fatalf("charges = %d, want 1", c)
	}
	t.Logf("%d concurrent calls, one key: 1 effect, %d identical answers, %d Aborted", n, ok, aborted)
}
