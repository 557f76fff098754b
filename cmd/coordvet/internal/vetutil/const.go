package vetutil

import (
	"go/constant"
	"go/types"
)

func constantString(tv types.TypeAndValue) (string, bool) {
	if tv.Value.Kind() != constant.String {
		return "", false
	}
	return constant.StringVal(tv.Value), true
}
