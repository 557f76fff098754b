// Package redsyncuse takes redsync locks: each is reported where it is made,
// not at the import (seen in an outside corpus: the finding sat on the import).
package redsyncuse

import (
	"github.com/go-redsync/redsync/v4"
)

type Jobs struct{ rs *redsync.Redsync }

func NewJobs(pool any) *Jobs { return &Jobs{rs: redsync.New(pool)} }

func (j *Jobs) Run(name string) error {
	m := j.rs.NewMutex("jobs/" + name) // want `pavedroad: a redsync mutex, a Redis lock without fencing tokens`
	if err := m.Lock(); err != nil {
		return err
	}
	_, err := m.Unlock()
	return err
}

func (j *Jobs) Nightly() *redsync.Mutex {
	return j.rs.NewMutex("jobs/nightly") // want `a redsync mutex`
}
