// Package forgedtoken defines an Analyzer that reports fencing tokens built
// outside the coordkit SDK.
//
// # Analyzer forgedtoken
//
// forgedtoken: report a coord.Token built or parsed from text made inside the process
//
// A fencing token is only worth something if it came from etcd: correctnesslease
// mints it from the create revision of the holder's key when the lease is
// granted (RFC MUST 3). A token assembled by hand can claim any revision, so a
// stale holder could outbid its successor. The check reports, in packages
// outside github.com/coordkit/coordkit, test files included:
//
//   - coord.ParseToken(s) or tok.UnmarshalText(b) whose text was made in this
//     process: a constant, a number formatted with strconv or fmt (a revision
//     kept in your own table and turned back into a token), a concatenation
//     of those, or a local variable only ever assigned such text;
//   - a composite literal of type coord.Token (the only one that compiles is
//     the zero token, which every resource rejects), except the zero token
//     returned beside a non-nil error (return coord.Token{}, err);
//   - a conversion to coord.Token or *coord.Token (for example from an
//     unsafe.Pointer);
//   - a //go:linkname directive that reaches into package coord.
//
// A zero check — tok == coord.Token{}, tok != (coord.Token{}), a switch case
// coord.Token{} — builds no token anyone presents and is not reported (tok.IsZero()
// says the same in fewer characters).
//
// Text received from outside the process — a header, a request body, a
// parameter, a config map, a real token's String() — is parsed as it should
// be. The fix: take the token from a holder's Token() or the tok parameter of
// correctnesslease.Run; declare the zero token as var zero coord.Token.
//
// Bad:
//
//	tok, err := coord.ParseToken(fmt.Sprintf("billing@%d", savedRevision))
//	return coord.Token{}, nil // a "token" for a caller to present
//
// Good:
//
//	tok, err := coord.ParseToken(r.Header.Get(coord.TokenHeader))
//	if err != nil {
//		return coord.Token{}, err
//	}
//	if tok == (coord.Token{}) { … } // or tok.IsZero()
package forgedtoken
