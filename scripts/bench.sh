#!/usr/bin/env bash
# Run every benchmark, coordkit and its peers side by side in one run on the same
# servers. Extra arguments go to `go test` (e.g. -bench Lease -count 5).
set -euo pipefail
cd "$(dirname "$0")/.."
services_env=$(scripts/services.sh postgres redis) # its exports: where each server is
eval "$services_env"
cd bench
exec go test -run '^$' -bench "${BENCH:-.}" -benchtime "${BENCHTIME:-2s}" -timeout 60m "$@" ./...
