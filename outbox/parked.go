package outbox

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ParkedEvent is an event in the dead-letter table. While it is there, later
// events of its key are not published.
type ParkedEvent struct {
	ID        ID
	Seq       int64
	Topic     string
	Key       string
	Type      string
	Payload   []byte
	Headers   map[string]string
	CreatedAt time.Time
	Attempts  int
	LastError string
	ParkedAt  time.Time
	// PayloadBytes is the payload's full length; Payload may hold only its
	// start (ParkedListOpts.MaxPayload).
	PayloadBytes int
}

// Bounds of ParkedListOpts.Limit.
const (
	DefaultParkedListLimit = 100
	MaxParkedListLimit     = 10000
)

// ParkedListOpts selects parked events for ParkedList and ParkedCount. A nil
// *ParkedListOpts selects every parked event (ParkedList: the first
// DefaultParkedListLimit).
type ParkedListOpts struct {
	Key   string // only this key (aggregate id); default any
	Topic string // only this topic (aggregate type); default any
	Type  string // only this event type; default any
	// Search keeps the events whose key starts with it or whose last error
	// contains it (case-insensitive); default "" (no search).
	Search string
	// After is ParkedListResult.Next of the previous page; default "": the first
	// page. ParkedCount ignores it.
	After string
	// Limit is at most how many events one page holds. Default
	// DefaultParkedListLimit; at most MaxParkedListLimit. ParkedCount ignores it.
	Limit int
	// MaxPayload bounds the payload characters each event carries (0: the whole
	// payload); PayloadBytes is always the full length.
	MaxPayload int
}

// ParkedListResult is one page of ParkedList.
type ParkedListResult struct {
	Events []ParkedEvent
	// Next is the After of the next page; "" when this page is the last.
	Next string
}

// ParkedGet returns one parked event without locking it, or an error matching
// ErrNotFound when id is not parked. It is read-only: one query, which ctx cancels.
func (o *Outbox) ParkedGet(ctx context.Context, db DBTX, id ID) (ParkedEvent, error) {
	rows, err := db.Query(ctx, `SELECT `+o.parkedCols(0)+` FROM `+o.dead+` WHERE id = $1`, id.String())
	if err != nil {
		return ParkedEvent{}, fmt.Errorf("outbox: parked %s: %w", id, err)
	}
	got, err := scanParked(rows)
	if err != nil {
		return ParkedEvent{}, fmt.Errorf("outbox: parked %s: %w", id, err)
	}
	if len(got) == 0 {
		return ParkedEvent{}, fmt.Errorf("%w: parked event %s", ErrNotFound, id)
	}
	return got[0], nil
}

// ParkedList returns one page of the parked events opts selects, in outbox
// order (seq): the operator's view (coordctl outbox parked list). Pages are
// keyset-paginated (ParkedListResult.Next). It is read-only and takes no lock:
// one query, which ctx cancels. A bad limit or cursor is a *ConfigError.
func (o *Outbox) ParkedList(ctx context.Context, db DBTX, opts *ParkedListOpts) (ParkedListResult, error) {
	var p ParkedListOpts
	if opts != nil {
		p = *opts
	}
	if p.Limit == 0 {
		p.Limit = DefaultParkedListLimit
	}
	if p.Limit < 0 || p.Limit > MaxParkedListLimit {
		return ParkedListResult{}, &ConfigError{Field: "ParkedListOpts.Limit", Reason: fmt.Sprintf("%d outside [1, %d]", p.Limit, MaxParkedListLimit)}
	}
	if p.MaxPayload < 0 {
		return ParkedListResult{}, &ConfigError{Field: "ParkedListOpts.MaxPayload", Reason: "negative"}
	}
	where, args, err := p.where(true)
	if err != nil {
		return ParkedListResult{}, err
	}
	args = append(args, p.Limit+1)
	rows, err := db.Query(ctx, `SELECT `+o.parkedCols(p.MaxPayload)+` FROM `+o.dead+where+
		` ORDER BY seq LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		return ParkedListResult{}, fmt.Errorf("outbox: parked list: %w", err)
	}
	got, err := scanParked(rows)
	if err != nil {
		return ParkedListResult{}, fmt.Errorf("outbox: parked list: %w", err)
	}
	res := ParkedListResult{Events: got}
	if len(got) > p.Limit {
		res.Events = got[:p.Limit]
		res.Next = base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(got[p.Limit-1].Seq, 10)))
	}
	return res, nil
}

// ParkedCount counts the parked events opts selects (its After, Limit and
// MaxPayload aside). It is read-only: one query, which ctx cancels.
func (o *Outbox) ParkedCount(ctx context.Context, db DBTX, opts *ParkedListOpts) (int64, error) {
	var p ParkedListOpts
	if opts != nil {
		p = *opts
	}
	where, args, err := p.where(false)
	if err != nil {
		return 0, err
	}
	var n int64
	if err := db.QueryRow(ctx, `SELECT count(*) FROM `+o.dead+where, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("outbox: parked count: %w", err)
	}
	return n, nil
}

// where renders p's filters (and, with page, its cursor) with only the
// predicates set.
func (p ParkedListOpts) where(page bool) (string, []any, error) {
	var conds []string
	var args []any
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	for _, f := range []struct{ col, v string }{{"aggregateid", p.Key}, {"aggregatetype", p.Topic}, {"type", p.Type}} {
		if f.v != "" {
			conds = append(conds, f.col+" = "+arg(f.v))
		}
	}
	if p.Search != "" {
		s := arg(p.Search)
		conds = append(conds, "(starts_with(aggregateid, "+s+") OR strpos(lower(coalesce(last_error, '')), lower("+s+")) > 0)")
	}
	if page && p.After != "" {
		b, err := base64.RawURLEncoding.DecodeString(p.After)
		seq, perr := strconv.ParseInt(string(b), 10, 64)
		if err != nil || perr != nil {
			return "", nil, &ConfigError{Field: "ParkedListOpts.After", Reason: fmt.Sprintf("%q is not a ParkedListResult.Next", p.After)}
		}
		conds = append(conds, "seq > "+arg(seq))
	}
	if len(conds) == 0 {
		return "", args, nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args, nil
}

// parkedCols are the columns scanParked reads, the payload cut to maxPayload
// characters (0: whole).
func (o *Outbox) parkedCols(maxPayload int) string {
	payload := "payload"
	if maxPayload > 0 {
		payload = "left(payload, " + strconv.Itoa(maxPayload) + ")"
	}
	return `id, seq, aggregatetype, aggregateid, type, ` + payload + `, headers::text, created_at, attempts, coalesce(last_error, ''), parked_at, octet_length(payload)`
}

// scanParked reads rows of parkedCols (or of the eleven columns without the
// payload's length) and closes them.
func scanParked(rows pgx.Rows) ([]ParkedEvent, error) {
	defer rows.Close()
	var out []ParkedEvent
	for rows.Next() {
		sized := len(rows.FieldDescriptions()) == 12
		var p ParkedEvent
		var id, payload, headers string
		dest := []any{&id, &p.Seq, &p.Topic, &p.Key, &p.Type, &payload, &headers, &p.CreatedAt, &p.Attempts, &p.LastError, &p.ParkedAt}
		if sized {
			dest = append(dest, &p.PayloadBytes)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		if !sized {
			p.PayloadBytes = len(payload)
		}
		var err error
		if p.ID, err = ParseID(id); err != nil {
			return nil, err
		}
		p.Payload = []byte(payload)
		_ = json.Unmarshal([]byte(headers), &p.Headers)
		out = append(out, p)
	}
	return out, rows.Err()
}

// Prune deletes published rows older than Config.Retention, in statements of at
// most Config.PruneBatch rows, until none is left; it returns how many it
// deleted. Relays call it every Config.PruneInterval; call it yourself if no relay
// runs. ctx cancels it between (or during) statements.
func (o *Outbox) Prune(ctx context.Context, db DBTX) (int64, error) {
	var total int64
	for {
		tag, err := db.Exec(ctx, o.sql.prune, o.cfg.Retention.Milliseconds(), o.cfg.PruneBatch)
		if err != nil {
			return total, fmt.Errorf("outbox: prune: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(o.cfg.PruneBatch) {
			return total, nil
		}
	}
}
