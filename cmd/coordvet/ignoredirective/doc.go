// Package ignoredirective defines an Analyzer that reports malformed
// //coordvet:ignore directives.
//
// # Analyzer ignoredirective
//
// ignoredirective: report //coordvet:ignore directives without a known check or a reason
//
// A finding of a coordvet check is silenced by a comment on its line or on the
// line above it:
//
//	//coordvet:ignore <check> <reason>
//
// The reason is mandatory, because a silenced finding is a decision someone
// will have to revisit. A directive that names no check, an unknown check, or
// no reason silences nothing and is reported here. A well-formed directive that
// silences nothing is reported by the check it names, so stale directives do
// not pile up.
//
// Bad:
//
//	//coordvet:ignore dualwrite
//	return nc.Publish("cache.invalidate", nil)
//
// Good:
//
//	//coordvet:ignore dualwrite best-effort cache invalidation; consumers re-read the row
//	return nc.Publish("cache.invalidate", nil)
package ignoredirective
