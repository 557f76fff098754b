package bad

import (
	"github.com/go-redsync/redsync/v4"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Tests may compare against the raw primitives: no findings here.
func compareWithRaw(s *concurrency.Session) {
	_ = concurrency.NewMutex(s, "/locks/billing")
	_ = redsync.New()
}
