package efficiencylock

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed release.lua
	releaseLua string
	//go:embed refresh.lua
	refreshLua string
	//go:embed pttl.lua
	pttlLua string
)

// script is a Lua script run by EVALSHA, falling back to EVAL when the server
// does not know it yet (first use, or after a restart or failover).
type script struct {
	src string
	sha string
}

func newScript(src string) script {
	h := sha1.Sum([]byte(src))
	return script{src: src, sha: hex.EncodeToString(h[:])}
}

// The scripts are immutable values computed once; they hold no mutable state.
var (
	releaseScript = newScript(releaseLua)
	refreshScript = newScript(refreshLua)
	pttlScript    = newScript(pttlLua)
)

// run executes the script and returns its integer reply.
func (s script) run(ctx context.Context, c Client, key string, args ...any) (int64, error) {
	keys := []string{key}
	n, err := c.EvalSha(ctx, s.sha, keys, args...).Int64()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		n, err = c.Eval(ctx, s.src, keys, args...).Int64()
	}
	return n, err
}
