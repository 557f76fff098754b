#!/usr/bin/env bash
# The README's "run" command: make sure the servers are up, then tell the story.
set -euo pipefail
cd "$(dirname "$0")/.."
services_env=$(scripts/services.sh postgres) # its exports: where each server is
eval "$services_env"
if [ -d cmd/coorddemo ]; then
  exec go run ./cmd/coorddemo "$@"
fi
# Until the demo lands, run the runnable examples of every package.
exec go test -count=1 -run '^Example' -v ./...
