package saga

import "encoding/json"

func withOutput(m map[string]json.RawMessage, step string, v []byte) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(m)+1)
	for k, x := range m {
		out[k] = x
	}
	out[step] = v
	return out
}
