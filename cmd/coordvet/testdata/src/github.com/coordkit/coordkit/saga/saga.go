// Package saga is a stub of the coordkit saga.
package saga

import "context"

type Step[T any] struct{ name string }

type Action[T any] func(ctx context.Context, state *T) error

type Saga[T any] struct{}

func New[T any](name string, steps ...Step[T]) (*Saga[T], error) { return &Saga[T]{}, nil }

func Compensatable[T any](name string, action, compensate Action[T]) Step[T] {
	return Step[T]{name}
}

func Pivot[T any](name string, action Action[T]) Step[T] { return Step[T]{name} }

func Retriable[T any](name string, action Action[T]) Step[T] { return Step[T]{name} }
