package pgfence

import (
	"log/slog"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/internal/pgschema"
)

// DefaultTable is the fence table's name when Config.Table is empty.
const DefaultTable = "coord_fences"

// Config configures a Fence. The zero Config is valid.
type Config struct {
	// Schema holds the fence table. Default "": the connection's search_path.
	Schema string
	// Table is the fence table's name. Default DefaultTable. Any printable UTF-8
	// without '.' of at most 63 bytes; it is always quoted, never concatenated raw.
	Table string
	// MeterProvider provides the coord.fence.rejected counter. Default
	// otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Logger receives a warning for every rejected token. Default slog.Default()
	// (looked up at each rejection, so slog.SetDefault applies).
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if c.MeterProvider == nil {
		c.MeterProvider = otel.GetMeterProvider()
	}
	return c
}

// validate checks a Config after withDefaults. Errors are *ConfigError.
func (c Config) validate() error {
	if c.Schema != "" {
		if ne := pgschema.CheckIdent("Schema", c.Schema); ne != nil {
			return nameError(ne)
		}
	}
	if ne := pgschema.CheckIdent("Table", c.Table); ne != nil {
		return nameError(ne)
	}
	return nil
}
