package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/coordkit/coordkit/internal/pgerr"
	"github.com/coordkit/coordkit/internal/pgtx"
)

// foundError carries the answer of a key that another writer committed while Do
// ran (record's unique violation).
type foundError struct {
	res Result
	err error
}

func (e *foundError) Error() string { return "idempotency: key committed meanwhile" }

// record sends the key row with COMMIT, in one round trip, and tells what is
// known from the answers: nil when COMMIT was answered (committed); a definite
// error when nothing was sent (ctx ended, connection already closed), when the
// server refused the key row (COMMIT then never ran; a unique violation is
// answered as the committed row says, through *foundError) or refused COMMIT
// itself; ErrCommitUnknown when the connection failed with COMMIT possibly
// delivered.
func (s *Store) record(ctx context.Context, conn *pgx.Conn, key Key, fp Fingerprint, resp Response, hdr []byte) error {
	if err := context.Cause(ctx); err != nil {
		pgtx.RollbackConn(ctx, conn)
		return fmt.Errorf("idempotency: store response for %s: not sent: %w", key, err)
	}
	if conn.IsClosed() {
		return fmt.Errorf("idempotency: store response for %s: the connection closed before COMMIT was sent, nothing committed", key)
	}
	b := &pgx.Batch{}
	b.Queue(s.q.insertCompleted, key.Scope, key.ID, fp[:], resp.Status, hdr, resp.Body)
	b.Queue("commit")
	br := conn.SendBatch(ctx, b)
	_, ierr := br.Exec()
	tag, cerr := br.Exec()
	berr := br.Close()
	switch {
	case ierr == nil && cerr == nil && tag.String() == "COMMIT":
		return nil // committed, whatever came after its answer
	case ierr == nil && cerr == nil:
		return fmt.Errorf("idempotency: store response for %s: %w", key, pgx.ErrTxCommitRollback)
	case errors.As(ierr, new(*pgconn.PgError)):
		// The server refused the key row (an ERROR, or a FATAL that ended the
		// session): COMMIT never ran.
		pgtx.RollbackConn(ctx, conn)
		if pgerr.Code(ierr) == pgerr.UniqueViolation {
			// A writer that does not take the key's lock (Store.Run claiming the
			// same key) committed it meanwhile: answer as that row says.
			r, ok, lerr := s.lookup(ctx, conn, key)
			if lerr != nil || !ok {
				return errors.Join(lerr, s.inFlight(ctx, key, time.Second, 0))
			}
			res, err := s.classify(ctx, conn, key, fp, r)
			return &foundError{res: res, err: err}
		}
		return fmt.Errorf("idempotency: store response for %s: %w", key, ierr)
	case ierr == nil && refused(cerr):
		pgtx.RollbackConn(ctx, conn)
		return fmt.Errorf("idempotency: commit %s: %w", key, cerr)
	}
	// The connection failed with COMMIT possibly delivered: the outcome is unknown.
	return fmt.Errorf("%w: %s: %w", ErrCommitUnknown, key, firstErr(ierr, cerr, berr))
}

// refused reports whether err is the server's refusal of COMMIT, which leaves the
// transaction rolled back: an ERROR (a deferred constraint, a serialization
// failure), not a FATAL or PANIC that ends the session while COMMIT may have gone
// through, nor a transport error.
func refused(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Severity != "FATAL" && pgErr.Severity != "PANIC"
}
