package pgtext_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/coordkit/coordkit/internal/pgtext"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// What PostgreSQL refuses (NUL, invalid UTF-8, a rune cut mid-way, in text and
// in jsonb), Clean turns into something it stores and returns unchanged.
func TestPostgresStoresEveryResult(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE t (s text, j jsonb)`); err != nil {
		t.Fatal(err)
	}
	inputs := []string{"a\x00b", "\xff\xfe", "\xe2\x82", "\xed\xa0\x80", strings.Repeat("a", 1999) + "€", strings.Repeat("ошибка ", 1<<20/13)}
	refused := 0
	for _, in := range inputs {
		raw, _ := json.Marshal(map[string]string{"v": in}) // Go keeps NUL as \u0000
		if _, err := db.Pool.Exec(ctx, `INSERT INTO t VALUES ($1, $2::jsonb)`, in, string(raw)); err != nil {
			refused++
		}
		for _, max := range []int{-1, 2, 64, 2000} {
			out := pgtext.Clean(in, max)
			j, _ := json.Marshal(map[string]string{"v": out})
			var s, v string
			if err := db.Pool.QueryRow(ctx, `INSERT INTO t VALUES ($1, $2::jsonb) RETURNING s, j->>'v'`, out, string(j)).Scan(&s, &v); err != nil {
				t.Fatalf("Clean(%.20q, %d): PostgreSQL refused it: %v", in, max, err)
			}
			if s != out || v != out {
				t.Fatalf("Clean(%.20q, %d): stored %.20q / %.20q", in, max, s, v)
			}
		}
	}
	// The inputs are hostile for real: the server refused the raw forms.
	if refused < 4 {
		t.Fatalf("PostgreSQL refused only %d of the raw inputs", refused)
	}
	t.Logf("raw inputs refused by PostgreSQL: %d of %d; every cleaned form stored", refused, len(inputs))
}
