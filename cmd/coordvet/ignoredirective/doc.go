// Package ignoredirective defines an Analyzer that reports //coordvet:ignore
// directives that are no exception under the RFC's rule.
//
// # Analyzer ignoredirective
//
// ignoredirective: report a //coordvet:ignore without an owner, an expiry within two quarters, a known check or a reason
//
// An exception to a MUST is recorded where the code is, with an owner and an
// expiry no later than two quarters after it was granted (RFC "Exceptions"):
//
//	//coordvet:ignore <check> owner=<team> expires=<YYYY-MM-DD> <reason>
//
// It silences the named check on its own line and on the next one. A
// directive that names no check or an unknown one (the fix suggests the
// nearest check name), has no owner=, no expires=, an expiry that is not a
// date, is past, or lies more than two quarters (six months) after today, or
// gives no reason, is no exception: it silences nothing, so the finding it
// meant to silence is reported again, and the directive is reported here.
// "Today" is -today=YYYY-MM-DD, else $COORDVET_TODAY, else the clock's date;
// an expiry date is valid through that day. A valid directive that silences
// nothing is reported by the check it names, with a fix that deletes it.
//
// Bad:
//
//	//coordvet:ignore dualwrite best-effort cache invalidation
//	return nc.Publish("cache.invalidate", nil)
//
// Good:
//
//	//coordvet:ignore dualwrite owner=search expires=2026-09-30 best-effort cache invalidation; readers re-read the row
//	return nc.Publish("cache.invalidate", nil)
package ignoredirective
