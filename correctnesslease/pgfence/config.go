package pgfence

import (
	"fmt"
	"log/slog"
	"unicode/utf8"

	"github.com/coordkit/coordkit/coord"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

// DefaultTable is the fence table's name when Config.Table is empty.
const DefaultTable = "coord_fences"

// maxIdentLen is PostgreSQL's identifier limit (NAMEDATALEN-1); longer names would be
// silently truncated by the server, so they are refused.
const maxIdentLen = 63

// Config configures a Fence. The zero Config is valid.
type Config struct {
	// Schema holds the fence table. Default "": the connection's search_path.
	Schema string
	// Table is the fence table's name. Default "coord_fences". Any printable UTF-8
	// of at most 63 bytes; it is always quoted, never concatenated raw.
	Table string
	// MeterProvider provides the coord.fence.rejected counter. Default
	// otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Logger receives a warning for every rejected token. Default slog.Default()
	// (looked up at each rejection, so slog.SetDefault applies).
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if err := validIdent("table", c.Table); err != nil {
		return err
	}
	if c.Schema != "" {
		if err := validIdent("schema", c.Schema); err != nil {
			return err
		}
	}
	if c.MeterProvider == nil {
		c.MeterProvider = otel.GetMeterProvider()
	}
	return nil
}

// validIdent accepts printable UTF-8 identifiers of 1..63 bytes. Quoting makes any
// such name safe; control characters and NUL are refused because they are never
// intended and pgx would strip NUL silently.
func validIdent(field, name string) error {
	bad := func(reason string) error {
		v := name
		if len(v) > 64 {
			v = v[:64]
		}
		return &coord.NameError{Field: field, Value: v, Reason: reason}
	}
	switch {
	case name == "":
		return bad("empty")
	case len(name) > maxIdentLen:
		return bad(fmt.Sprintf("longer than %d bytes", maxIdentLen))
	case !utf8.ValidString(name):
		return bad("not valid UTF-8")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return bad(fmt.Sprintf("control character %U", r))
		}
	}
	return nil
}

// quoted returns the sanitized, quoted (optionally schema-qualified) name.
func quoted(schema, name string) string {
	if schema == "" {
		return pgx.Identifier{name}.Sanitize()
	}
	return pgx.Identifier{schema, name}.Sanitize()
}
