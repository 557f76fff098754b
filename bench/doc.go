// Package bench holds coordkit's side-by-side benchmarks: each file measures a
// coordkit package and its peer libraries in the same run, on the same servers
// (embedded etcd, the local PostgreSQL and Redis). It is its own module so the
// peers never enter the SDK's dependency graph. Run: scripts/bench.sh.
package bench
