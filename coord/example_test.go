package coord_test

import (
	"errors"
	"fmt"

	"github.com/coordkit/coordkit/coord"
)

// A resource receives a token over the wire (an HTTP header) and parses it.
func ExampleParseToken() {
	tok, err := coord.ParseToken("/tenants/acme/elections/billing@1234")
	if err != nil {
		panic(err)
	}
	fmt.Println(tok.Lease(), tok.Revision())
	// Output: /tenants/acme/elections/billing 1234
}

func ExampleKey() {
	k, _ := coord.Key("acme", coord.KindElections, "billing")
	fmt.Println(k)
	_, err := coord.Key("acme", coord.KindElections, "../etc")
	fmt.Println(errors.Is(err, coord.ErrInvalidName), err)
	// Output:
	// /tenants/acme/elections/billing
	// true coord: invalid name "../etc": contains '/'
}
