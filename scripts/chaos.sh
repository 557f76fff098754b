#!/usr/bin/env bash
# The full reliability tier: every scenario with more trials and longer faults
# (COORD_FULL=1), then docs/reliability.md is rewritten from their reports.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh
report=$(mktemp)
export COORD_FULL=1 COORD_RELIABILITY_REPORT="$report"
status=0
# Every package's fault tests (they report through coordtest.Report), then the
# whole-SDK scenarios of the reliability module.
go test -count=1 -timeout 60m ./... || status=$?
(cd reliability && go test -count=1 -timeout 60m ./...) || status=$?
(cd reliability && go run ./cmd/reliabilityreport -in "$report" -out ../docs/reliability.md -cmd "scripts/chaos.sh")
echo "wrote docs/reliability.md ($(wc -l < "$report") scenario results)"
exit $status
