// Command grpcproxybin is etcd's own server binary, built from
// go.etcd.io/etcd/server/v3/etcdmain at the version coordkit's client uses;
// coordtest.GRPCProxy runs its "grpc-proxy start" subcommand. It is etcd's
// main, unchanged: coordkit does not write a proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
