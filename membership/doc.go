// Package membership is a service registry on etcd that cannot silently vanish,
// and a watch of a service that never freezes.
//
// Register puts an instance's key (/tenants/{tenant}/members/{service}/{instance})
// under a lease of its own and keeps it there: on any loss — the lease expired
// during an outage, the key deleted or overwritten — it grants a new lease and
// puts the key again, with jittered backoff and no retry cap, until Deregister.
// Watch gives a consumer the whole set of a service at an exact revision on
// every change, resumes after errors and re-lists after a compaction;
// membership/grpcresolver turns it into a gRPC resolver (coord:///tenant/service).
//
//	reg, err := membership.Register(ctx, cli, membership.Config{
//		Tenant: "acme", Service: "checkout", Instance: podName, Addr: "10.0.0.7:8080",
//	})
//	if err != nil {
//		return err
//	}
//	defer func() {
//		if err := reg.Deregister(context.Background()); err != nil {
//			log.Printf("deregister: %v", err)
//		}
//	}()
//
//	w, err := membership.Watch(ctx, cli, "acme", "checkout", nil)
//	if err != nil {
//		return err
//	}
//	defer w.Close()
//	for v := range w.Updates() { // v.Members sorted, v.Revision exact
//		rebalance(v.Members)
//	}
//
// The guide is docs/membership.md; the metrics are in docs/metrics.md.
package membership
