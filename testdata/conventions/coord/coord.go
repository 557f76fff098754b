// Package coord is a floor that imports a driver, for TestConventionsCatchViolations.
package coord

import "github.com/jackc/pgx/v5"

// Identifier is pgx's.
type Identifier = pgx.Identifier
