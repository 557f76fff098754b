package badfeature

import (
	"fmt"

	"github.com/coordkit/coordkit/coord"
	"github.com/jackc/pgx/v5"
)

var _ = fmt.Sprint(coord.Token{}, pgx.Identifier{})
