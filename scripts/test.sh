#!/usr/bin/env bash
# The one test command: servers, then vet, gofmt, staticcheck and the race-enabled
# tests of every module in the repository. Exit code 0 only if all pass. -count=1:
# the tests talk to real servers, so a result is never taken from the test cache.
set -euo pipefail
cd "$(dirname "$0")/.."
export CI="${CI:-}"
STATICCHECK="honnef.co/go/tools/cmd/staticcheck@v0.8.2"

services_env=$(scripts/services.sh) # its exports: where each server is
eval "$services_env"

# Every module in the repo: the SDK, and the ones that keep heavy dependencies
# (x/tools, fault-injection tooling) out of the SDK's graph.
modules=(.)
for m in bench cmd/coordvet reliability; do [ -f "$m/go.mod" ] && modules+=("$m"); done

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt needed:"; echo "$unformatted"; exit 1; fi

for m in "${modules[@]}"; do
  echo "== $m: go vet"
  (cd "$m" && go vet ./...)
  echo "== $m: staticcheck"
  (cd "$m" && go run "$STATICCHECK" ./...)
done

for m in "${modules[@]}"; do
  echo "== $m: go test -race"
  (cd "$m" && go test -race -count=1 -timeout 25m ${COORD_TEST_FLAGS:-} ./...)
done
