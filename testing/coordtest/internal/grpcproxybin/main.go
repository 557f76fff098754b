// Command grpcproxybin is etcd's own server binary, built from
// go.etcd.io/etcd/server/v3/etcdmain at the version coordkit's client uses;
// coordtest.GRPCProxy runs its "grpc-proxy start" subcommand. It is etcd's
// main, unchanged (but for ending with the test binary that started it):
// coordkit does not write a proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"

	"github.com/coordkit/coordkit/testing/coordtest/internal/orphan"
)

func main() {
	orphan.ExitWithParent()
	etcdmain.Main(os.Args)
}
