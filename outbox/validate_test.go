package outbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestEnqueueRejectsPoisonWithTypedErrors(t *testing.T) {
	db, ob := setup(t, outbox.Config{Table: "ob", MaxPayloadBytes: 1024})
	cases := []struct {
		name string
		e    outbox.Event
		want error
	}{
		{"invalid utf8", outbox.Event{Topic: "t", Key: "k", Type: "x", Payload: []byte{0xff, 0xfe}}, outbox.ErrInvalidUTF8},
		{"nul byte", outbox.Event{Topic: "t", Key: "k", Type: "x", Payload: []byte("a\x00b")}, outbox.ErrInvalidUTF8},
		{"json u0000", outbox.Event{Topic: "t", Key: "k", Type: "x", Payload: []byte(`{"a":"\u0000"}`), JSON: true}, outbox.ErrInvalidJSON},
		{"json lone surrogate", outbox.Event{Topic: "t", Key: "k", Type: "x", Payload: []byte(`["\ud800"]`), JSON: true}, outbox.ErrInvalidJSON},
		{"json huge number", outbox.Event{Topic: "t", Key: "k", Type: "x", Payload: []byte(`1e1000000`), JSON: true}, outbox.ErrInvalidJSON},
		{"not json", outbox.Event{Topic: "t", Key: "k", Type: "x", Payload: []byte(`{`), JSON: true}, outbox.ErrInvalidJSON},
		{"oversized", outbox.Event{Topic: "t", Key: "k", Type: "x", Payload: []byte(strings.Repeat("a", 1025))}, outbox.ErrPayloadTooLarge},
		{"empty topic", outbox.Event{Key: "k", Type: "x"}, outbox.ErrEmptyField},
		{"empty key", outbox.Event{Topic: "t", Type: "x"}, outbox.ErrEmptyField},
		{"empty type", outbox.Event{Topic: "t", Key: "k"}, outbox.ErrEmptyField},
		{"bad key utf8", outbox.Event{Topic: "t", Key: "\xff", Type: "x"}, outbox.ErrInvalidUTF8},
		{"long key", outbox.Event{Topic: "t", Key: strings.Repeat("k", outbox.MaxKeyBytes+1), Type: "x"}, outbox.ErrFieldTooLong},
		{"bad header", outbox.Event{Topic: "t", Key: "k", Type: "x", Headers: map[string]string{"h": "\xff"}}, outbox.ErrInvalidUTF8},
	}
	ctx := context.Background()
	rejected := 0
	for _, c := range cases {
		tx, err := db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ob.EnqueueTx(ctx, tx, c.e)
		var ee *outbox.EventError
		if !errors.Is(err, outbox.ErrInvalidEvent) || !errors.Is(err, c.want) || !errors.As(err, &ee) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		} else {
			rejected++
		}
		// the transaction is still usable and the batch path rejects too
		_, berr := ob.EnqueueBatchTx(ctx, tx, []outbox.Event{ev("ok", 0), c.e})
		if !errors.As(berr, &ee) || ee.Index != 1 || !errors.Is(berr, c.want) {
			t.Errorf("%s batch: got %v", c.name, berr)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatalf("%s: tx unusable after rejection: %v", c.name, err)
		}
	}
	if rejected != len(cases) {
		t.Fatalf("rejected %d of %d", rejected, len(cases))
	}
	if n := count(t, db.Pool, `SELECT count(*) FROM ob`); n != 0 {
		t.Fatalf("%d rows written, want 0", n)
	}
}

// The one identifier rule: any printable name without '.' is quoted, never
// interpreted; a name over 63 bytes — itself or any name derived from it — is a
// *ConfigError naming the field the caller set.
func TestTableNames(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	for _, tc := range []struct {
		cfg   outbox.Config
		field string // "" when valid
	}{
		{outbox.Config{Table: `x"; DROP TABLE y; --`}, ""},
		{outbox.Config{Table: "ünï code"}, ""},
		{outbox.Config{Table: long(52)}, ""}, // + "_parked_key" = 63
		// 34 to 40 bytes used to fail on the derived dead-letter table, and a long
		// schema.table on a channel the caller never named.
		{outbox.Config{Table: long(53)}, "Table"},
		{outbox.Config{Schema: long(63), Table: long(40)}, ""},
		{outbox.Config{Table: long(53), DeadLetterTable: "dl", Channel: "ch"}, ""},
		{outbox.Config{Table: long(58), DeadLetterTable: "dl", Channel: "ch"}, "Table"}, // + "_published"
		{outbox.Config{Table: "t", DeadLetterTable: long(60)}, "DeadLetterTable"},       // + "_key"
		{outbox.Config{Table: "t", Channel: long(64)}, "Channel"},
		{outbox.Config{Table: "app.ob"}, "Table"},
		{outbox.Config{Schema: "s\x00"}, "Schema"},
		{outbox.Config{Table: "ok", DeadLetterTable: "ok"}, "DeadLetterTable"},
	} {
		_, err := outbox.New(tc.cfg)
		var ce *outbox.ConfigError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%q/%q: %v, want it accepted", tc.cfg.Schema, tc.cfg.Table, err)
		case tc.field != "" && (!errors.Is(err, outbox.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != tc.field):
			t.Errorf("%q/%q: %v, want a *ConfigError for %s", tc.cfg.Schema, tc.cfg.Table, err, tc.field)
		}
	}
	for table, bad := range map[string]bool{long(53): false, long(54): true, "a.b": true, "\n": true} {
		_, err := outbox.NewInbox(outbox.InboxConfig{Table: table})
		if bad != errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("inbox %q: %v, want refused: %v", table, err, bad)
		}
	}
	// A schema-qualified, mixed-case, hostile name is quoted, not folded: both
	// tables and every statement use it literally.
	db := coordtest.Postgres(t)
	const hostile = `Mixed "Case"; --`
	ob := newOutbox(t, db.Pool, outbox.Config{Schema: db.Schema, Table: hostile})
	enqueue(t, db.Pool, ob, ev("k", 0))
	if n := count(t, db.Pool, `SELECT count(*) FROM "Mixed ""Case""; --"`); n != 1 {
		t.Fatalf("rows = %d", n)
	}
	if n := count(t, db.Pool, `SELECT count(*) FROM "Mixed ""Case""; --_parked"`); n != 0 {
		t.Fatalf("parked rows = %d", n)
	}
}

// validatorSeeds are payloads whose acceptance by PostgreSQL jsonb the validator
// must predict.
var validatorSeeds = []string{
	`{}`, `[]`, `"x"`, `{"a":"\u0000"}`, `"\u0001"`, `"\ud800"`, `"\udc00"`, `"\ud83d\ude00"`, `"\ud83d"`,
	`1e131071`, `1e1000000`, `1e-16383`, `1e-20000`, `-0.5e-3`, `[1,2`, `{"a":1}x`, `"\\u0000"`, `123.456e7`,
	"\"\xff\"", `{"k":[true,false,null,1.5]}`, `"é"`, `"\u00e9"`, `0`, `-0`, `"a\u0000b"`,
}

// The validator agrees with the real server: everything it accepts, jsonb
// accepts, and everything jsonb rejects, it rejects.
func TestValidatorAgreesWithPostgresJSONB(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx := context.Background()
	for _, s := range validatorSeeds {
		vErr := outbox.ValidatePayload([]byte(s), true, 0)
		var pgErr error
		if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
			_, pgErr = db.Pool.Exec(ctx, `SELECT $1::text::jsonb`, s)
		} else {
			pgErr = errors.New("not text")
		}
		if vErr == nil && pgErr != nil {
			t.Errorf("%q: validator accepts, PostgreSQL rejects: %v", s, pgErr)
		}
		if vErr != nil && pgErr == nil {
			t.Logf("%q: validator stricter than PostgreSQL: %v", s, vErr)
		}
	}
}

func FuzzValidatePayload(f *testing.F) {
	for _, s := range validatorSeeds {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, b []byte, isJSON bool) {
		err := outbox.ValidatePayload(b, isJSON, 1<<16)
		if err == nil {
			if !utf8.Valid(b) || strings.ContainsRune(string(b), 0) || len(b) > 1<<16 {
				t.Fatalf("accepted %q", b)
			}
			if isJSON && strings.Contains(string(b), `\u0000`) && !strings.Contains(string(b), `\\u0000`) {
				t.Fatalf("accepted JSON with \\u0000: %q", b)
			}
			return
		}
		var ee *outbox.EventError
		if !errors.As(err, &ee) || !errors.Is(err, outbox.ErrInvalidEvent) {
			t.Fatalf("untyped error %v", err)
		}
	})
}

// An EnqueueTx in a transaction that rolls back leaves nothing.
func TestEnqueueRollbackLeavesNothing(t *testing.T) {
	db, ob := setup(t, outbox.Config{Table: "ob"})
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ob.EnqueueTx(ctx, tx, ev("k", 0)); err != nil {
		t.Fatal(err)
	}
	tx.Rollback(ctx)
	if n := count(t, db.Pool, `SELECT count(*) FROM ob`); n != 0 {
		t.Fatalf("rows = %d", n)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error { _, err := ob.EnqueueTx(cctx, tx, ev("k", 0)); return err })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
}
