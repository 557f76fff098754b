#!/usr/bin/env bash
# The README's "run" command: PostgreSQL (the only server the demo uses; it starts
# an embedded etcd itself), then the demo. Arguments go to the demo
# (scripts/demo.sh -part gcpause).
#
# The demo is built race-instrumented, as scripts/test.sh builds everything, when a
# C compiler is installed: after the tests it then only links (seconds). Without
# one it builds plainly, and nothing else is installed for it.
set -euo pipefail
cd "$(dirname "$0")/.."

services_env=$(scripts/services.sh postgres) # its exports: where PostgreSQL is
eval "$services_env"

# -ldflags=-w as scripts/test.sh: the same coordvet binary as the tests' (so go
# vet's cached results apply) and a shorter link.
flavor="plain build: no C compiler for -race"
export GOFLAGS="$(go env GOFLAGS) -ldflags=-w"
if scripts/services.sh --check cc; then
  export GOFLAGS="$GOFLAGS -race"
  flavor="race-instrumented, sharing scripts/test.sh's build cache"
fi
. scripts/lib/progress.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
phase "building the demo ($flavor; after scripts/test.sh: seconds; on a cold cache: ~700 packages, ~600 MB of build cache, 2-4 min)"
while_running "go build ./cmd/coorddemo" "$(go env GOCACHE)" go build -o "$tmp/coorddemo" ./cmd/coorddemo
phase "running the demo"
"$tmp/coorddemo" "$@"
