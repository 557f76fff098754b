package grpcresolver_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/membership/grpcresolver"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// A server registers its address; a client dials coord:///{tenant}/{service}
// and reaches it through the resolver.
func ExampleNewBuilder() {
	cli, stop := coordtest.ExampleEtcd()
	defer stop()
	ctx := context.Background()

	// The server side: serve, then register the address.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(ln)
	defer srv.Stop()
	reg, err := membership.Register(ctx, cli, membership.Config{
		Tenant: "acme", Service: "checkout", Instance: "pod-1", Addr: ln.Addr().String(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Deregister(ctx)

	// The client side.
	builder, err := grpcresolver.NewBuilder(cli, grpcresolver.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	cc, err := grpc.NewClient("coord:///acme/checkout", grpc.WithResolvers(builder),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cc.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(cc).Check(rctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Status)
	// Output: SERVING
}
