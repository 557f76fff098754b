// Package badfeature breaks every house rule once, for TestConventionsCatchViolations.
//
//	s, _ := badfeature.New(badfeature.Config{})
//	s.Migrate(ctx, pool)
package badfeature
