package grpcresolver_test

import (
	"errors"
	"net/url"
	"testing"

	"github.com/coordkit/coordkit/membership/grpcresolver"
)

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func errorsIsInvalid(err error) bool { return errors.Is(err, grpcresolver.ErrInvalidConfig) }
