#!/usr/bin/env bash
# The README's two commands on a fresh machine, reproducibly: a minimal Debian 12
# root (debootstrap --variant=minbase, from the host's Debian mirror) with only
# git, ca-certificates and the host's Go copied in; a clone of this repository's
# HEAD in it; then, in network, PID and mount namespaces of their own (loopback
# only, so the host's servers are invisible and nothing can be downloaded):
#
#   CI=true scripts/test.sh      then      scripts/demo.sh
#
# with empty Go build caches, each one's wall time printed. What a fresh machine
# would download is fetched first, in the host's network, and timed on its own:
# the modules of every module of the repo, staticcheck's among them (go mod download into
# the root's module cache) and the Debian packages the scripts install (apt-get
# install --download-only in the root). Then the services checks
# (scripts/services_test.sh) run, each in fresh namespaces of its own.
#
#   sudo scripts/fresh-machine.sh          # needs root: debootstrap, chroot, unshare
#
# Exit status: 0 only if both commands and every services check passed. Not part
# of scripts/test.sh. The Debian root, the downloaded packages and the module
# cache are kept in $COORD_FRESH_DIR (default /var/tmp/coordkit-fresh) for the next
# run; the measured root is a new copy each time. FRESH_CLEAN=1 starts from nothing.
# Only committed work is tested (it clones HEAD).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${COORD_FRESH_DIR:-/var/tmp/coordkit-fresh}
budget=600

trap 'say "failed (line $LINENO: $BASH_COMMAND)" >&2' ERR
say() { printf 'fresh-machine: %s\n' "$*"; }
die() { say "$*" >&2; exit 1; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, unshare): sudo $0"
for tool in unshare chroot ip; do command -v "$tool" >/dev/null || die "needs $tool on the host"; done
command -v debootstrap >/dev/null || { say "apt-get install debootstrap"; apt-get install -y -qq debootstrap >/dev/null; }
mkdir -p "$dir"
# One run at a time: a second would delete the root the first one runs in.
exec 9>"$dir/lock"
flock -n 9 || die "another run holds $dir/lock"
[ "${FRESH_CLEAN:-}" != 1 ] || find "$dir" -mindepth 1 -maxdepth 1 ! -name lock -exec rm -rf --one-file-system {} +
exec > >(tee "$dir/last-run.log") 2>&1
say "log: $dir/last-run.log; host load: $(uptime | sed 's/.*load average/load average/')"

# The host's Debian mirror (deb822 .sources or one-line sources.list).
mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ && $2 !~ /security/ { print $2; exit }')
[ -n "$mirror" ] || mirror=$(awk '/^deb / && $0 !~ /security/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
security=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ && $2 ~ /security/ { print $2; exit }')
[ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list*"
security=${security:-${mirror%/debian}/debian-security}

# 1. The pristine Debian root, made once and kept.
base=$dir/base
goroot=$(go env GOROOT)
if [ ! -x "$base/usr/bin/git" ]; then
  say "debootstrap bookworm (minbase + git, ca-certificates) from $mirror: 1-3 min"
  rm -rf --one-file-system "$base.tmp"
  start=$(now)
  debootstrap --variant=minbase --include=git,ca-certificates bookworm "$base.tmp" "$mirror" >"$dir/debootstrap.log" 2>&1 \
    || { tail -20 "$dir/debootstrap.log"; die "debootstrap failed (log: $dir/debootstrap.log)"; }
  cat >"$base.tmp/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security bookworm-security main
EOF
  printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >"$base.tmp/etc/hosts"
  rm -rf --one-file-system "$base"
  mv "$base.tmp" "$base"
  say "debootstrap: $(secs "$start") s"
fi

# 2. A new copy for this run, with the host's Go and a clone of HEAD.
root=$dir/root
rm -rf --one-file-system "$root"
say "copying the Debian root and the host's Go ($(go version | cut -d' ' -f3))"
cp -a "$base" "$root"
mkdir -p "$root/usr/local"
cp -a "$goroot" "$root/usr/local/go"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The host's own CA certificates (an egress proxy's, say): the prefetch reaches the
# registries as the host does.
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null 2>&1
fi
touch "$root/etc/coordkit-fresh-machine" # scripts/services_test.sh runs only where this is
git clone -q "$repo" "$root/root/coordkit"
git -C "$root/root/coordkit" checkout -q "$(git -C "$repo" rev-parse HEAD)"
say "testing commit $(git -C "$root/root/coordkit" log --oneline -1)"
[ -z "$(git -C "$repo" status --porcelain --untracked-files=no)" ] || say "note: uncommitted changes in $repo are not tested"

# The module cache and the downloaded packages are kept between runs.
mkdir -p "$dir/gomodcache" "$dir/apt-archives" "$root/root/go/pkg/mod"

# in_root [--offline] CMD...: runs CMD in the root, in a mount namespace of its own
# (and, --offline, network and PID namespaces too, with loopback up), as root with
# a clean environment.
in_root() {
  local ns=(--mount) offline=
  if [ "$1" = --offline ]; then ns=(--mount --net --pid --kill-child); offline=1; shift; fi
  unshare "${ns[@]}" --fork -- bash -c '
    set -e
    root=$1 modcache=$2 offline=$3; shift 3
    [ -z "$offline" ] || ip link set lo up
    mount --rbind /dev "$root/dev"
    mount -t proc proc "$root/proc"
    mount -t sysfs sysfs "$root/sys" 2>/dev/null || true
    mount --bind "$modcache" "$root/root/go/pkg/mod"
    exec chroot "$root" /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 \
      PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
  ' _ "$root" "$dir/gomodcache" "$offline" "$@"
}

# 3. Fetch, in the host's network, what a fresh machine would download.
say "prefetch: Go modules (every module of the repo) and the Debian packages the scripts install"
start=$(now)
cp -a "$dir/apt-archives/." "$root/var/cache/apt/archives/" 2>/dev/null || true
packages=$(in_root /root/coordkit/scripts/services.sh --packages | tr '\n' ' ')
in_root bash -c "
  set -e
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -qq -y --download-only --no-install-recommends $packages sudo >/dev/null
  cd /root/coordkit
  export GOFLAGS=-modcacherw
  . scripts/lib/modules.sh
  for m in \$(go_modules); do
    (cd \$m && go mod download && go list -deps -test ./... >/dev/null)
  done
"
cp -a "$root/var/cache/apt/archives/"*.deb "$dir/apt-archives/" 2>/dev/null || true
prefetch=$(secs "$start")
say "prefetch: $prefetch s ($(du -sm "$dir/gomodcache" | cut -f1) MB of modules, $(du -cm "$root"/var/cache/apt/archives/*.deb | tail -1 | cut -f1) MB of packages; kept in $dir for the next run)"

# 4. The two commands, offline, in namespaces of their own, on empty build caches.
say "running the README's two commands offline (CI=true scripts/test.sh, then scripts/demo.sh); host load: $(cut -d' ' -f1-3 /proc/loadavg)"
in_root --offline bash -c '
  cd /root/coordkit
  secs() { local m=${1%%m*} r=${1#*m}; r=${r%s}; echo $((m * 60 + ${r%.*})); }
  timed() { # name command...: runs it; appends "name status seconds cpu-seconds" to /root/fresh-times
    local name=$1 s=$SECONDS rc=0 t; shift
    t=$( ( "$@" >&3 2>&4 5>&-; rc=$?; times >&5; exit $rc ) 5>&1 ) || rc=$? # (servers started must not hold fd 5)
    set -- $t # shell user, sys; children user, sys
    local cpu=$(( $(secs "$3") + $(secs "$4") ))
    echo "$name $rc $((SECONDS - s)) $cpu" >>/root/fresh-times
    echo "fresh-machine: $name exited $rc after $((SECONDS - s)) s (CPU of its processes: $cpu s)"
    return $rc
  }
  exec 3>&1 4>&2
  rm -f /root/fresh-times
  rc=0
  timed test env CI=true scripts/test.sh || rc=1
  timed demo scripts/demo.sh || rc=1
  exit $rc
' && commands=0 || commands=1
read -r _ test_rc t_test cpu_test < <(grep '^test ' "$root/root/fresh-times" || echo "test ? ? ?")
read -r _ demo_rc t_demo cpu_demo < <(grep '^demo ' "$root/root/fresh-times" || echo "demo ? ? ?")

# 5. The services checks, each in fresh namespaces of its own.
say "services checks (scripts/services_test.sh), each in fresh namespaces"
in_root bash -c 'DEBIAN_FRONTEND=noninteractive apt-get install -qq -y --no-install-recommends sudo >/dev/null 2>&1' || true
checks=0
for c in $(in_root /root/coordkit/scripts/services_test.sh list); do
  if in_root --offline /root/coordkit/scripts/services_test.sh run "$c"; then say "check $c: ok"
  else say "check $c: FAILED"; checks=1; fi
done

total=$(( ${t_test//\?/0} + ${t_demo//\?/0} ))
say "summary: prefetch $prefetch s (downloads, not in the budget); CI=true scripts/test.sh $t_test s (exit $test_rc, CPU $cpu_test s); scripts/demo.sh $t_demo s (exit $demo_rc, CPU $cpu_demo s)"
verdict="within"
[ "$total" -le "$budget" ] || verdict="OVER"
say "first test run + demo: $total s, $verdict the budget of $budget s; host load now: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
[ "$commands" = 0 ] || die "a README command failed (output above)"
[ "$checks" = 0 ] || die "a services check failed (output above)"
say "both commands and every services check passed"
