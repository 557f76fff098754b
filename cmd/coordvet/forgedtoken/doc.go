// Package forgedtoken defines an Analyzer that reports fencing tokens built
// outside the coordkit SDK.
//
// # Analyzer forgedtoken
//
// forgedtoken: report a coord.Token built outside the SDK
//
// A fencing token is only worth something if it came from etcd: correctnesslease
// mints it from the create revision of the holder's key when the lease is
// granted (RFC MUST 3). A token assembled by hand can claim any revision, so a
// stale holder could outbid its successor. The check reports, in packages
// outside github.com/coordkit/coordkit, test files included:
//
//   - a composite literal of type coord.Token (the only one that compiles is
//     coord.Token{}, the zero token every resource rejects);
//   - a conversion to coord.Token or *coord.Token (for example from an
//     unsafe.Pointer);
//   - a //go:linkname directive that reaches into package coord.
//
// The fix: take the token from (*correctnesslease.Lease).Token() or the tok
// parameter of correctnesslease.Run; a resource that receives a token over the
// wire parses it with coord.ParseToken. Code that needs the zero token
// declares it (var zero coord.Token) and tests for it with tok.IsZero().
//
// Bad:
//
//	tok := *(*coord.Token)(unsafe.Pointer(&myToken{lease: "billing", rev: 1 << 40}))
//	ledger.Charge(ctx, tok, invoice)
//
// Good:
//
//	tok, err := coord.ParseToken(r.Header.Get(coord.TokenHeader))
//	if err != nil {
//		return err
//	}
//	ledger.Charge(ctx, tok, invoice)
package forgedtoken
