// Package coordtest gives tests real servers: an embedded etcd, a cluster of etcd
// processes that can be paused, killed and restarted, etcd's grpc-proxy, PostgreSQL and Redis (shared,
// isolated per test, or private instances that a test may kill), a TCP proxy that
// cuts or delays connections, and a fake clock for the coord clock seam.
//
// Nothing here is a fake of a server. A test that needs a server it cannot reach
// fails with a message saying how to start it (scripts/services.sh); it never skips.
//
// Environment:
//
//	COORD_TEST_POSTGRES_URL  default postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
//	COORD_TEST_REDIS_URL     default redis://127.0.0.1:6379/0
//	COORD_TEST_NATS_URL      default nats://127.0.0.1:4222
//	COORD_TEST_ETCD_BIN      an etcd binary for EtcdCluster; default: built from
//	                         this module's internal/etcdbin (same server version
//	                         as the client) on first use
//	COORD_TEST_ETCD_PROXY_BIN  an etcd binary for GRPCProxy (run as
//	                         `etcd grpc-proxy start`); default: built from
//	                         internal/grpcproxybin (etcd's own main) on first use
//
// coordtest is for tests and cmd/ only; library code never imports it.
package coordtest
