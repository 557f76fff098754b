// Package concurrency is a stub of go.etcd.io/etcd/client/v3/concurrency.
package concurrency

import "context"

type Session struct{}

func NewSession(client any) (*Session, error) { return &Session{}, nil }

type Mutex struct{}

func (m *Mutex) Lock(ctx context.Context) error { return nil }

func NewMutex(s *Session, pfx string) *Mutex { return &Mutex{} }

type locker struct{}

func (locker) Lock()   {}
func (locker) Unlock() {}

func NewLocker(s *Session, pfx string) interface {
	Lock()
	Unlock()
} {
	return locker{}
}

type Election struct{}

func NewElection(s *Session, pfx string) *Election { return &Election{} }
