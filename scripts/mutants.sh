#!/usr/bin/env bash
# The mutation gate (not part of scripts/test.sh): do the tests of the packages
# whose bugs cost money notice when the code is wrong?
#
#   scripts/mutants.sh                 every package below, then the curated mutants
#   scripts/mutants.sh pgfence saga    only these (keys of the table below, or "curated")
#   MUTANTS_DRY_RUN=1 scripts/mutants.sh ...   list gremlins' mutants without running them
#   MUTANTS_CURATED=regexp scripts/mutants.sh curated   only the curated mutants whose id matches
#   MUTANTS_TIMEOUT_COEFFICIENT=2 scripts/mutants.sh ...  a mutant's test run may take this many
#     times the coverage run before it counts as timed out (default 5; a loaded machine makes the
#     coverage run slow, and every mutant that hangs then costs the whole timeout)
#
# Go code: github.com/go-gremlins/gremlins (installed into its own GOBIN, never the
# SDK's go.mod) mutates operators and conditions in the listed files and runs the
# package's tests against each mutant. SQL strings and Lua scripts, which it cannot
# reach, are covered by scripts/mutants.txt: each line is one deliberate bug,
# applied to a copy, the package's tests run, the copy restored.
#
# Everything runs on a copy of the work tree (tracked and untracked files), so the
# work tree is never mutated. Packages run one after another, gremlins with one
# worker: the machine is shared. The score per package is
#   (killed + timed out) / (killed + timed out + lived + not covered - equivalent)
# where scripts/mutants-equivalent.txt lists the surviving mutants that change no
# behaviour, each with its reason, and the ones gremlins cannot run (a case
# expression is outside Go's coverage blocks, so gremlins calls it "not
# covered") whose same mutation is a curated mutant (reason "curated:<id>"):
# those count as killed when the curated run kills them. The run fails when a package scores under
# MUTANTS_TARGET (default 90) or a curated mutant survives.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
target="${MUTANTS_TARGET:-90}"
GREMLINS="github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0"
tools="${COORD_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/coordkit-tools}"
mkdir -p "$tools"
[ -x "$tools/gremlins" ] || (cd "$tools" && GOBIN="$tools" GOFLAGS= go install "$GREMLINS")
services_env=$(scripts/services.sh) # its exports: where each server is
eval "$services_env"

# key; package; files gremlins mutates (basenames, a regexp); tests left out (the
# slow fault scenarios of the default run, a -skip regexp: the score does not
# rely on them); optionally, the tests run (a -run regexp, for a package whose
# whole suite is too slow to run once per mutant on this machine). Each
# mutant's test run stops at its first failure (gremlins passes -failfast).
packages=(
  "pgfence;./correctnesslease/pgfence;(fence|row);TestPausedHolderWritesAreRejected$|TestClusterFaultsKeepFencedIncrementsExact$|TestClusterScenarioCatchesAnUnfencedResource$"
  "correctnesslease;./correctnesslease;(queue|keygone|acquire|lease|batch);TestBlackholedHolderStepsDownFirst$|TestDelayedKeepalivesStepDownFirst$|TestKeepaliveSharedBy1000Leases$|TestDeadlineMidQueueLeavesNoKey$|TestPausedHolderReportsItsOwnExpiry$;^Test(UnknownQueue|CloseDoesNot|AcquireRelease|TryAcquireHeld|FIFOAndNoHerd|KeyDeleted|CancelWhileWaiting|ReleaseNeverDeletes|ContextCause|SessionLostWhileWaiting|LeftoverKey|ConcurrentRelease|FailedReleaseCanBeRetried|InvalidNames|ConfigValidation|LeaseValid|StepDownPrecedesExpiry|FatalKeepaliveErrors|KeyGoneWithEtcdUnreachable|EndedNamesWhy|KeyGoneReads|QueueAfterAFence|FenceAttempt|CleanupAttempt|KeyResync|PredecessorResync|WaiterRetriesAFailedRead|LossOfAHeldLease|WaiterBacksOff|ConcurrentAcquiresShare|BatchedRelease)"
  "idempotency;./idempotency;(store);TestAmbiguousCommitRetryIsExactlyOnce$|TestPhasedCrashIsFinished$"
  "outbox-relay;./outbox;(relay);TestRelaySurvivesPostgresCrashRestart$|TestPerKeyOrderWithSeveralRelays$"
  "saga-drive;./saga;(drive);TestCrashAtEveryBoundary$"
  "failstatic;./failstatic;(statefile);TestAllMembersStoppedAndClientRestarted$|TestReconnectHerd$|TestWatcherBlackholedDuringUpdatesAndCompaction$"
  "ownership;./ownership;(partition|slot|assign);TestShortBlackholeChangesNothing$|TestOutageLongerThanStepDown$|TestBlackholedOwnerTakenOver$|TestSteadyStateWritesNothing$"
  "membership;./membership;(registration|keep|view|set);TestEtcdOutage$|TestWatcherBlackholedDuringChurnAndCompaction$|TestManyRegistrationsOneTenant$"
)
want=("$@")
selected() { [ ${#want[@]} -eq 0 ] && return 0; local k; for k in "${want[@]}"; do [ "$k" = "$1" ] && return 0; done; return 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
snapshot() { # a fresh copy of the work tree in $work/src
  rm -rf "$work/src" && mkdir -p "$work/src"
  git ls-files -co --exclude-standard -z | tar --null -T - -c | tar -x -C "$work/src"
}
results="${MUTANTS_OUT:-/tmp/coordkit-mutants}"
mkdir -p "$results"
failed=0
summary=()

for entry in "${packages[@]}"; do
  IFS=';' read -r key pkg files skip run <<< "$entry"
  selected "$key" || continue
  snapshot
  dir="${pkg#./}"
  # Every non-test file of the package that is not listed is left alone, and so
  # are sub-packages (gremlins sees paths relative to the package).
  excludes=(-E /)
  for f in "$work/src/$dir"/*.go; do
    b=$(basename "$f" .go)
    [[ "$b" == *_test ]] && continue
    [[ "$b" =~ ^${files}$ ]] || excludes+=(-E "^${b}\.go\$")
  done
  out="$results/$key.json"
  flags=(--workers 1 --timeout-coefficient "${MUTANTS_TIMEOUT_COEFFICIENT:-5}" --invert-logical --invert-loopctrl -o "$out")
  [ -n "${MUTANTS_DRY_RUN:-}" ] && flags+=(--dry-run)
  goflags="-count=1 -skip=${skip}"
  [ -n "$run" ] && goflags+=" -run=${run}"
  echo "== gremlins $key ($pkg: ${files}); tests left out: ${skip}${run:+; tests run: $run}"
  start=$(date +%s)
  (cd "$work/src" && GOFLAGS="$goflags" "$tools/gremlins" unleash "${flags[@]}" "${excludes[@]}" "$pkg" > "$results/$key.log" 2>&1) || true
  took=$(( $(date +%s) - start ))
  if [ ! -s "$out" ]; then echo "gremlins produced no report for $key (see $results/$key.log)"; failed=1; continue; fi
  # Per mutant: file:line:column TYPE STATUS, then the score with the equivalents.
  jq -r '.files[] | .file_name as $f | .mutations[] | "\($f):\(.line):\(.column) \(.type) \(.status)"' "$out" | sort > "$results/$key.txt"
  count() { grep -c " $1\$" "$results/$key.txt" || true; }
  killed=$(count KILLED); lived=$(count LIVED); timedout=$(count "TIMED OUT"); uncovered=$(count "NOT COVERED"); viable=$(count "NOT VIABLE")
  equiv=0; twins=0; stale=(); listed=()
  while IFS=$'\t' read -r k id type reason; do
    [ "$k" = "$key" ] || continue
    if ! grep -qE "^${id} ${type} (LIVED|NOT COVERED)\$" "$results/$key.txt"; then
      stale+=("$id $type"); continue
    fi
    listed+=("$id $type")
    if [[ "$reason" =~ ^curated:([^[:space:]]+) ]]; then
      # Not reachable by gremlins (a case expression lies outside Go's coverage
      # blocks): the same mutation is a curated mutant, which this gate runs.
      grep -q "^${BASH_REMATCH[1]}"$'\t' scripts/mutants.txt || { echo "  $id $type: curated twin ${BASH_REMATCH[1]} not in scripts/mutants.txt"; failed=1; continue; }
      twins=$((twins + 1))
    else
      equiv=$((equiv + 1))
    fi
  done < <(grep -v '^#' scripts/mutants-equivalent.txt || true)
  denom=$((killed + timedout + lived + uncovered - equiv))
  score=100
  [ "$denom" -gt 0 ] && score=$(( 100 * (killed + timedout + twins) / denom ))
  line="$key: killed $killed, timed out $timedout, lived $lived, not covered $uncovered (of which run as curated mutants $twins), not viable $viable, equivalent $equiv -> ${score}% ($took s)"
  echo "$line"
  grep " LIVED\$\| NOT COVERED\$" "$results/$key.txt" | while read -r id type status; do
    printf '%s\n' "${listed[@]}" | grep -qxF "$id $type" || echo "  survivor: $id $type $status"
  done
  for s in "${stale[@]}"; do echo "  stale equivalent (no longer a survivor): $s"; done
  summary+=("$line")
  if [ -z "${MUTANTS_DRY_RUN:-}" ] && [ "$score" -lt "$target" ]; then failed=1; fi
done

# Curated mutants: id, package, file, from, to (\n and \t in from/to are a newline
# and a tab); the package's whole test suite runs against each, -failfast.
if selected curated && [ -z "${MUTANTS_DRY_RUN:-}" ]; then
  snapshot
  killed=0; total=0; start=$(date +%s)
  while IFS=$'\t' read -r id pkg file from to; do
    [[ -z "$id" || "$id" == \#* ]] && continue
    [[ "$id" =~ ${MUTANTS_CURATED:-.} ]] || continue
    total=$((total + 1))
    cp "$work/src/$file" "$work/orig"
    if ! FROM="$from" TO="$to" perl -0pi -e '
        BEGIN { for ($ENV{FROM}, $ENV{TO}) { s/\\n/\n/g; s/\\t/\t/g } ($f, $t) = ($ENV{FROM}, $ENV{TO}) }
        $n = () = /\Q$f\E/g; die "matches $n times\n" if $n != 1; s/\Q$f\E/$t/' "$work/src/$file"; then
      echo "curated $id: does not apply to $file (code changed? update scripts/mutants.txt)"; failed=1; continue
    fi
    if (cd "$work/src" && go test -count=1 -failfast -timeout 15m "$pkg" > "$results/curated-$id.log" 2>&1 < /dev/null); then
      echo "curated $id: SURVIVED ($pkg passes with it; see $results/curated-$id.log)"; failed=1
    else
      killed=$((killed + 1))
      echo "curated $id: killed by $(grep -m1 -o -- '--- FAIL: [A-Za-z0-9_/]*' "$results/curated-$id.log" | sed 's/--- FAIL: //' || echo 'a build or test failure')"
    fi
    cp "$work/orig" "$work/src/$file"
  done < scripts/mutants.txt
  summary+=("curated (SQL, Lua, etcd compares): killed $killed of $total ($(( $(date +%s) - start )) s)")
fi

echo "== mutation gate"
printf '%s\n' "${summary[@]}"
exit $failed
