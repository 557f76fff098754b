#!/usr/bin/env bash
# The one test command: what the tests need (scripts/services.sh), then gofmt,
# go vet, staticcheck and the tests of every module in the repository,
# race-enabled but for the analyzer's module (see race below). Exit code 0 only
# if all pass. -count=1: the tests talk to real servers, so a result is never
# taken from the test cache.
#
# How the first run (cold caches) stays short on a 2-core machine:
# - GOFLAGS=-race for every go command, vet and staticcheck included: a package is
#   compiled once, race-instrumented, and vet, staticcheck, the tests and
#   scripts/demo.sh reuse that work; only the tools and servers the tests run
#   (staticcheck, coordvet, the etcd members) are built plain, since
#   race-instrumented they run several times slower (the etcd server is built by
#   the first cluster test that needs it, the other test processes waiting for
#   that build, coordtest.Build);
# - -ldflags=-w (no DWARF) for every binary: a race-instrumented test binary links
#   in ~3.5 CPU-s instead of 6-8 (about 50 of them); race reports and panics keep
#   their file:line (they come from the pclntab, not DWARF);
# - go test -vet=off: go vet has run already;
# - go test in three lanes, -p 3 each (COORD_TEST_P): most test binaries spend
#   their time waiting on TTLs and servers, not computing (the root package: 13
#   CPU-s in 75 s), so one module at a time with go's default of one package per
#   core left the machine idle behind each module's slowest package;
# - the servers and chromium install in the background while vet compiles;
# - staticcheck runs in the background beside the tests (CPU while they wait).
# Extra go test flags: COORD_TEST_FLAGS (e.g. COORD_TEST_FLAGS='-run Lease').
set -euo pipefail
cd "$(dirname "$0")/.."
export CI="${CI:-}"

. scripts/lib/progress.sh
. scripts/lib/modules.sh
mapfile -t modules < <(go_modules)

phase "services: a C compiler first (go test -race needs cgo)"
scripts/services.sh cc

# The servers install and start while the code compiles; their exports arrive at
# the end of this file. Never abandon an apt-get half way: wait for it on exit.
# services.sh's exit status goes to a file, read by services_wait, so no path
# depends on the shell still holding a record of the process (a failed run
# printed "wait_for: No record of process" from the exit trap).
tmp=$(mktemp -d)
services_pid=
staticcheck_pid=
updates_pid=
services_wait() { # returns services.sh's exit status once it has ended
  while [ ! -s "$tmp/services.rc" ] && kill -0 "$services_pid" 2>/dev/null; do sleep 1; done
  return "$(cat "$tmp/services.rc" 2>/dev/null || echo 1)"
}
finish() {
  local rc=$?
  if [ -n "$staticcheck_pid" ]; then kill "$staticcheck_pid" 2>/dev/null || true; wait "$staticcheck_pid" 2>/dev/null || true; fi
  if [ -n "$updates_pid" ]; then kill "$updates_pid" 2>/dev/null || true; wait "$updates_pid" 2>/dev/null || true; fi
  if [ -n "$services_pid" ] && [ ! -s "$tmp/services.rc" ] && kill -0 "$services_pid" 2>/dev/null; then
    echo "== waiting for scripts/services.sh to finish before exiting"
    services_wait || true
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap finish EXIT
phase "services: PostgreSQL, Redis, NATS JetStream and chromium, in the background (first time: installs ~350 MB of packages, 1-2 min)"
(
  rc=0
  scripts/services.sh postgres postgres-bin redis redis-bin nats nats-bin chromium >"$tmp/services.env" || rc=$?
  echo "$rc" >"$tmp/services.rc"
) &
services_pid=$!

gocache=$(go env GOCACHE)
gomodcache=$(go env GOMODCACHE)
phase "modules: go mod download for ${modules[*]} (first time: ~460 MB into $gomodcache)"
for m in "${modules[@]}"; do
  while_running "go mod download ($m)" "$gomodcache" sh -c "cd '$m' && go mod download"
done

# Available updates of each module's direct requirements, listed at the end,
# never a failure: go list -m -u asks the module proxy, in the background beside
# the build (about 3 s a module); unreachable (offline runs) or silent for 20 s,
# the list says so. Seen on every run, an update is not a surprise.
(
  tmpl='{{if and (not .Indirect) (not .Main) (not .Replace)}}{{if .Error}}E{{else if .Update}}U {{.Path}} {{.Version}} -> {{.Update.Version}}{{else}}C{{end}}{{end}}'
  for m in "${modules[@]}"; do
    list=$(cd "$m" && timeout 20 go list -m -u -e -f "$tmpl" all 2>/dev/null) || true
    ups=$(grep '^U' <<<"$list" | sed 's/^U /  /' || true)
    n=$(grep -c . <<<"$list" || true) errs=$(grep -c '^E' <<<"$list" || true)
    if [ "$n" = 0 ] || [ "$errs" = "$n" ]; then
      echo "$m: not checked (the module proxy was unreachable or slow)"
    else
      note=; [ "$errs" = 0 ] || note=", $errs not checked"
      echo "$m: $n direct requirements, $(grep -c . <<<"$ups" || true) with an update$note"
      [ -z "$ups" ] || echo "$ups"
    fi
  done
) >"$tmp/updates.out" 2>&1 &
updates_pid=$!

phase "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt needed:"; echo "$unformatted"; exit 1; fi

# race MODULE: whether the module is built and tested race-instrumented: every
# module but the analyzer's (cmd/coordvet). Its analyzers run one package per
# process, and its tests type-check stub trees from source: race-instrumented,
# they cost 162 CPU-s instead of 84, and x/tools compiled twice (the analyzer's
# own builds and staticcheck's are plain).
race() { [ "$1" = cmd/coordvet ] && echo false || echo true; }

# The compiler (through go vet) and staticcheck run with GOGC=400: they are the
# first run's CPU (staticcheck alone ~390 CPU-s: it type-checks and builds SSA for
# every dependency from source) and allocate heavily; the bigger heap (~2 GB for
# staticcheck) costs 7-15 % less CPU (staticcheck of ./ownership, cold: 164 -> 137
# CPU-s; go build ./ownership, cold: 70 -> 66). The tests keep the default.
tool_gogc=400

phase "building the test progress printer"
export GOFLAGS="$(go env GOFLAGS) -race -ldflags=-w"
go -C scripts/tools build -o "$tmp/gotestprogress" ./gotestprogress

phase "go vet, ${#modules[@]} modules (first time: compiles ~900 packages race-instrumented into ~1 GB of build cache, 3-5 min on 2 idle cores; the tests reuse it)"
for m in "${modules[@]}"; do
  while_running "go vet ($m)" "$gocache" sh -c "cd '$m' && GOGC=$tool_gogc go vet -race=$(race "$m") ./..."
done

# The API gate (scripts/tools/apigate, api/README.md): the exported API of the
# published packages against api/*.txt and CHANGELOG.md. It reads the export
# data go vet just compiled (a few seconds). To record a change:
# go -C scripts/tools run ./apigate -w
phase "API gate: exported names against api/*.txt and CHANGELOG.md"
go -C scripts/tools run -race=false ./apigate

# staticcheck is CPU work of its own (its cold build ~2 min, then it analyses every
# dependency from source) and the tests mostly wait on TTLs: it is built and runs
# beside them, its verdict printed after them. The tools module (scripts/tools) pins
# it; it is built without -race (it would analyse several times slower).
phase "staticcheck, ${#modules[@]} modules: built and run in the background beside the tests (first time: ~5 min of CPU)"
(
  GOGC=$tool_gogc go -C scripts/tools build -race=false -o "$tmp/staticcheck" honnef.co/go/tools/cmd/staticcheck ||
    { echo "building staticcheck failed"; exit 1; }
  rc=0
  for m in "${modules[@]}"; do
    (cd "$m" && GOGC=$tool_gogc GOFLAGS="$GOFLAGS -race=$(race "$m")" "$tmp/staticcheck" ./...) || { echo "staticcheck ($m) found problems"; rc=1; }
  done
  exit "$rc"
) >"$tmp/staticcheck.out" 2>&1 &
staticcheck_pid=$!

if [ ! -s "$tmp/services.rc" ]; then phase "waiting for scripts/services.sh"; fi
services_wait || { services_pid=; echo "scripts/services.sh failed (its messages are above)"; exit 1; }
services_pid=
eval "$(cat "$tmp/services.env")" # where each server is: COORD_TEST_*_URL
env | grep '^COORD_TEST_' | sed 's/^/  /'

packages=0
for m in "${modules[@]}"; do packages=$((packages + $(cd "$m" && go list ./... | wc -l))); done
# Three lanes at once (see the top): the SDK module (.); the reliability
# scenarios alone (the longest wait: one test binary of sequential scenarios,
# 4.5-6 min); every other module, one after another. With the other modules
# after reliability in its lane, that lane ran ~100 s after the SDK's (a run at
# aaf16d2: 7m25s against 5m36s); with cmd/coordctl and bench still behind it,
# ~35 s (the fresh-machine run at 582c85a).
lane_b=(reliability) lane_c=()
for m in "${modules[@]}"; do [ "$m" = . ] || [ "$m" = reliability ] || lane_c+=("$m"); done
# lane MODULE...: go test each module, one after another, at most COORD_TEST_P
# test binaries at once. The progress printer reads every lane, each through a
# pipe of its own (so their lines never mix), and counts a lane's failures from
# its FAIL lines.
lane() {
  for m in "$@"; do
    (cd "$m" && go test -race="$(race "$m")" -vet=off -count=1 -p "${COORD_TEST_P:-3}" -timeout 25m ${COORD_TEST_FLAGS:-} ./... 2>&1) || echo "FAIL	module $m: go test exited non-zero"
  done
}
phase "go test (-race but cmd/coordvet): $packages packages in ${#modules[@]} modules, three lanes at once: [.], [${lane_b[*]}] and [${lane_c[*]}] (the slowest run for minutes; a line at least every 25 s)"
status=0
"$tmp/gotestprogress" -packages "$packages" -cache "$gocache" -recap "$tmp/recap" <(lane .) <(lane "${lane_b[@]}") <(lane "${lane_c[@]}") || status=$?
if kill -0 "$staticcheck_pid" 2>/dev/null; then phase "waiting for staticcheck"; fi
if wait "$staticcheck_pid"; then
  echo "staticcheck: clean (${#modules[@]} modules)"
else
  cat "$tmp/staticcheck.out"
  status=1
fi
staticcheck_pid=
phase "available updates (go list -m -u; informational)"
wait "$updates_pid" 2>/dev/null || true
updates_pid=
cat "$tmp/updates.out"
# Last, why the tests failed: a long log is often read by its end only.
if [ -s "$tmp/recap" ]; then
  phase "why the tests failed: each failed test's first and last lines (its whole output is above)"
  cat "$tmp/recap"
fi
phase "done"
exit "$status"
