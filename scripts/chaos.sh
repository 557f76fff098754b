#!/usr/bin/env bash
# The full reliability tier: every scenario with more trials and longer faults
# (COORD_FULL=1). docs/reliability.md's generated section is rewritten from the
# scenarios' reports only when the whole run is green and the reports hold up
# against reliability/scenarios.tsv (none missing, duplicated, cut short, failed
# or fault-free); otherwise the document is left as it was and the problems are
# listed. The rows are kept in $COORD_RELIABILITY_REPORT (default: a temp file).
set -euo pipefail
cd "$(dirname "$0")/.."
services_env=$(scripts/services.sh) # its exports: where each server is
eval "$services_env"
report="${COORD_RELIABILITY_REPORT:-$(mktemp --suffix=.jsonl)}"
: > "$report"
candidate=$(mktemp --suffix=.md)
trap 'rm -f "$candidate"' EXIT
export COORD_FULL=1 COORD_RELIABILITY_REPORT="$report"
status=0
start=$(date +%s)
# Every package's fault tests (they report through coordtest.Report), then the
# whole-SDK scenarios of the reliability module.
go test -count=1 -timeout 60m ./... || status=$?
(cd reliability && go test -count=1 -timeout 60m ./...) || status=$?
echo "chaos: tests took $(( $(date +%s) - start )) s; $(grep -c '"state":"finished"' "$report" || true) scenarios finished; rows in $report"
checked=0
(cd reliability && go run ./cmd/reliabilityreport -in "$report" -manifest scenarios.tsv -tier full \
  -doc ../docs/reliability.md -out "$candidate" -cmd "scripts/chaos.sh") || checked=$?
if [ "$status" -ne 0 ] || [ "$checked" -ne 0 ]; then
  echo "chaos: FAILED (tests exit $status, report check exit $checked): docs/reliability.md not rewritten" >&2
  exit 1
fi
cat "$candidate" > docs/reliability.md
echo "chaos: wrote docs/reliability.md"
