// Package bad breaks each rule of the admin verb set once (adminverbs_test.go).
package bad

import "context"

// Row is a stored object.
type Row struct{}

// Store holds rows.
type Store struct{}

// Get returns a row, without saying which noun.
func (s *Store) Get(ctx context.Context, id string) (Row, error) { return Row{}, nil }

// RowGet returns a row; ok is false when there is none (ErrNotFound is not used).
func (s *Store) RowGet(ctx context.Context, id string) (Row, bool, error) { return Row{}, false, nil }

// ItemGet returns an item, and says nothing of a missing one.
func (s *Store) ItemGet(ctx context.Context, id string) (Row, error) { return Row{}, nil }

// Inspect is a read by another name.
func (s *Store) Inspect(ctx context.Context, id string) (Row, error) { return Row{}, nil }

// Services lists without the verb.
func Services(ctx context.Context) ([]Row, error) { return nil, nil }

// RowList lists rows and says whether there were any.
func (s *Store) RowList(ctx context.Context) ([]Row, bool, error) { return nil, false, nil }

// Peek returns a row with ok.
func (s *Store) Peek(ctx context.Context) (Row, bool, error) { return Row{}, false, nil }

// Snapshot is the old name.
//
// Deprecated: use GoodGet.
func (s *Store) Snapshot(ctx context.Context) (Row, bool, error) { return Row{}, false, nil }

// GoodGet returns a row, or an error matching ErrNotFound.
func (s *Store) GoodGet(ctx context.Context, id string) (Row, error) { return Row{}, nil }

// GoodList returns rows.
func (s *Store) GoodList(ctx context.Context) ([]Row, error) { return nil, nil }

func (s *Store) unexported(ctx context.Context) (Row, bool, error) { return Row{}, false, nil }
