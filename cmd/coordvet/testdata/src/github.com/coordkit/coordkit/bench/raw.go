// Package bench is SDK code: it may use the raw primitives (no findings).
package bench

import (
	"github.com/go-redsync/redsync/v4"
	"go.etcd.io/etcd/client/v3/concurrency"
)

func raw(s *concurrency.Session) {
	_ = concurrency.NewMutex(s, "/locks/billing")
	_ = redsync.New()
}
