#!/usr/bin/env bash
# Ensure what the tests and the demo need is installed and running, checked by
# capability (a port that answers the protocol, a binary that runs), never by the
# presence of a client tool:
#
#   cc            a C compiler and libc headers cgo can use (go test -race needs cgo)
#   postgres      a PostgreSQL on loopback that trusts user postgres (5432, or the port
#                 of the local cluster it configured)
#   postgres-bin  PostgreSQL server binaries (initdb, postgres) for PrivatePostgres
#   redis         a Redis on loopback that answers PING (6379, or a port of its own)
#   redis-bin     redis-server, for PrivateRedis
#   nats          a NATS server with JetStream (4222; when the server there has
#                 JetStream off, one of its own with JetStream on the next free port)
#   nats-bin      nats-server, for tests that start their own
#   chromium      Debian's chromium, able to render a page headless
#
#   scripts/services.sh [capability...]     # default: all of them
#   scripts/services.sh --packages [cap...]  # the Debian packages they install
#   scripts/services.sh --check cap...       # exit 0 if all are there; change nothing
#   scripts/services.sh --wait-apt-lock      # wait for the package manager's lock (below), then exit
#
# Progress goes to stderr. Stdout gets one `export NAME=value` line per server, so
# callers do  eval "$(scripts/services.sh postgres)"  to learn where each one is:
# COORD_TEST_POSTGRES_URL, COORD_DEMO_POSTGRES_URL, COORD_TEST_REDIS_URL,
# COORD_TEST_NATS_URL, COORD_TEST_CHROMIUM. Idempotent: what already answers is left
# alone, and a server it started earlier is found again. Only apt-get and the
# PostgreSQL cluster need root; without root or sudo it says what to run as root.
# Servers it starts itself keep their data and logs in $COORD_SERVICES_DIR
# (default /var/lib/coordkit as root, ~/.local/state/coordkit otherwise).
set -euo pipefail

all_caps=(cc postgres postgres-bin redis redis-bin nats nats-bin chromium)

log() { printf 'services: %s\n' "$*" >&2; }
. "$(dirname "$0")/lib/progress.sh"
die() { log "$*"; exit 1; }

# packages_of prints the Debian packages that provide a capability.
packages_of() {
  case $1 in
    cc) echo gcc libc6-dev ;;
    postgres|postgres-bin) echo postgresql ;;
    redis|redis-bin) echo redis-server ;;
    nats|nats-bin) echo nats-server ;;
    chromium) echo chromium ;;
    *) die "unknown capability $1 (have: ${all_caps[*]})" ;;
  esac
}

# as_root runs a command as root: directly or through sudo. Callers check
# can_root first, so that without either they can say what to run instead.
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}
can_root() { [ "$(id -u)" = 0 ] || [ -x "$(command -v sudo 2>/dev/null)" ]; }
need_root() { # what, command to run as root
  can_root && return 0
  die "$1 needs root, and there is no sudo here; run as root:
services:   $2
services: then run this again."
}

apt_updated=
apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  need_root "installing ${missing[*]}" "apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
  apt_log=$(mktemp)
  wait_apt_lock
  if [ -z "$apt_updated" ]; then
    log "apt-get update"
    # Offline (or a mirror down), the package lists already on disk still serve.
    apt_run update || log "apt-get update failed; using the package lists on disk"
    apt_updated=1
  fi
  log "apt-get install ${missing[*]} (with their dependencies; first time 1-3 min)"
  local start=$SECONDS
  if ! while_running "apt-get install" /var/cache/apt/archives \
      apt_run install -y --no-install-recommends "${missing[@]}"; then
    cat "$apt_log" >&2
    die "apt-get install ${missing[*]} failed"
  fi
  log "installed ${missing[*]} in $((SECONDS - start))s ($(grep -c '^Setting up' "$apt_log") packages set up)"
  rm -f "$apt_log"
}

# apt_run runs apt-get as root, its output into $apt_log (shown when it fails).
# Should another apt-get take the lock after wait_apt_lock, apt-get itself waits
# for it (DPkg::Lock::Timeout) instead of failing at once.
apt_run() { as_root env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout="$apt_lock_wait" "$@" >>"$apt_log" 2>&1; }

# The locks apt-get and dpkg take. A fresh cloud machine holds them for minutes
# after boot (cloud-init, unattended-upgrades), and apt-get fails at once on a
# held lock ("Could not get lock /var/lib/dpkg/lock-frontend"): wait_apt_lock
# waits, saying for whom, at most COORD_APT_LOCK_WAIT seconds (default 600).
apt_locks=(/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock)
apt_lock_wait=${COORD_APT_LOCK_WAIT:-600}

# apt_lock_holder prints "PID (command)" of a process holding one of apt_locks (a
# POSIX lock in /proc/locks on the file's inode), or nothing.
apt_lock_holder() {
  local f inodes=() pid dev cmd
  for f in "${apt_locks[@]}"; do [ -e "$f" ] && inodes+=("$(stat -c %i "$f")"); done
  [ ${#inodes[@]} -gt 0 ] || return 0
  # 1: POSIX  ADVISORY  WRITE 11021 fe:00:398607 0 EOF   (waiters have "->" first: skipped)
  while read -r _ kind _ _ pid dev _; do
    [ "$kind" = POSIX ] || continue
    for f in "${inodes[@]}"; do
      if [ "${dev##*:}" = "$f" ]; then
        cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-60) || cmd=
        echo "process $pid (${cmd% })"
        return 0
      fi
    done
  done </proc/locks
}

# wait_apt_lock returns once no process holds the package manager's lock; dies
# after apt_lock_wait seconds, naming the holder.
wait_apt_lock() {
  local holder start=$SECONDS next=0
  while holder=$(apt_lock_holder) && [ -n "$holder" ]; do
    local waited=$((SECONDS - start))
    if [ "$waited" -ge "$apt_lock_wait" ]; then
      die "the package manager's lock is still held by $holder after ${waited}s; wait for it to finish (a fresh machine's boot-time upgrade takes minutes) and run this again, or set COORD_APT_LOCK_WAIT=seconds to wait longer"
    fi
    if [ "$waited" -ge "$next" ]; then
      if [ "$next" = 0 ]; then
        log "waiting for the package manager's lock, held by $holder (a fresh cloud machine upgrades itself at boot for minutes); up to ${apt_lock_wait}s"
      else
        log "still waiting for the package manager's lock, held by $holder [${waited}s of at most ${apt_lock_wait}s]"
      fi
      next=$((waited + 20))
    fi
    sleep 1
  done
  [ "$next" = 0 ] || log "the package manager's lock is free after $((SECONDS - start))s"
}

# wait_until polls a check for up to 60 s.
wait_until() { # what, command...
  local what=$1; shift
  for _ in $(seq 1 120); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  die "$what did not become ready within 60s"
}

tcp_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

state_dir() {
  local d=${COORD_SERVICES_DIR:-}
  if [ -z "$d" ]; then
    if [ "$(id -u)" = 0 ]; then d=/var/lib/coordkit; else d=${XDG_STATE_HOME:-$HOME/.local/state}/coordkit; fi
  fi
  mkdir -p "$d" && echo "$d"
}

next_free_port() {
  local port=$1
  while tcp_open "$port"; do port=$((port + 1)); done
  echo "$port"
}

# free_or_ours PORT PROBE: finds, from PORT on, the first port where PROBE answers
# (a server of ours from an earlier run) or nothing listens (where to start one).
# Prints "ours PORT" or "free PORT".
free_or_ours() {
  local port=$1 probe=$2
  for _ in $(seq 1 100); do
    if "$probe" "$port" >/dev/null 2>&1; then echo "ours $port"; return; fi
    if ! tcp_open "$port"; then echo "free $port"; return; fi
    port=$((port + 1))
  done
  die "no free port from $1 on"
}

# ---- cc ---------------------------------------------------------------------

cc_ok() {
  local cc; cc=$(go env CC 2>/dev/null || echo gcc)
  printf '#include <stdio.h>\nint main(void) { puts("ok"); return 0; }\n' |
    $cc -x c -o /dev/null - >/dev/null 2>&1
}

ensure_cc() {
  if cc_ok; then log "cc: a C compiler cgo can use is installed"; return; fi
  apt_install gcc libc6-dev
  cc_ok || die "cc: gcc installed but cannot build a C program"
  log "cc: gcc installed (go test -race needs cgo)"
}

# ---- PostgreSQL ---------------------------------------------------------------

# pg_probe PORT: speaks the PostgreSQL startup protocol as user postgres, database
# postgres. Prints "ok" (trusted, ReadyForQuery seen), "auth" (the server wants a
# password), "error: <message>" or "none" (nothing that speaks PostgreSQL).
pg_probe() {
  local hex
  # StartupMessage (length 41, protocol 3.0, user=postgres database=postgres), Terminate.
  hex=$( { exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 0
           printf '\x00\x00\x00\x29\x00\x03\x00\x00user\x00postgres\x00database\x00postgres\x00\x00' >&3
           printf 'X\x00\x00\x00\x04' >&3
           timeout 3 od -An -v -tx1 <&3; } 2>/dev/null | tr -d ' \n')
  local i=0 n=${#hex} type len first=1
  while [ $((i + 10)) -le "$n" ]; do
    type=${hex:i:2}; len=$((16#${hex:i+2:8}))
    if [ "$first" = 1 ]; then
      first=0
      case $type in
        52) [ "${hex:i+10:8}" = 00000000 ] || { echo auth; return; } ;;
        45) ;;
        *) echo none; return ;;
      esac
    fi
    case $type in
      5a) echo ok; return ;;
      45) # ErrorResponse: print its M (message) field.
        local body=${hex:i+10:(len-4)*2} msg
        msg=$(printf "$(sed 's/../\\x&/g' <<<"$body")" | tr '\0' '\n' | sed -n 's/^M//p' | head -1)
        echo "error: $msg"; return ;;
    esac
    i=$((i + 2 + len * 2))
  done
  echo none
}

pg_ok() { [ "$(pg_probe "$1")" = ok ]; }

pg_url() { echo "postgres://postgres@127.0.0.1:$1/postgres?sslmode=disable"; }

pg_bin_ok() { compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null && compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; }

ensure_postgres_bin() {
  [ -z "${pg_bin_done:-}" ] || return 0
  pg_bin_done=1
  if pg_bin_ok; then log "postgres-bin: server binaries in $(dirname "$(ls /usr/lib/postgresql/*/bin/postgres | sort -V | tail -1)")"; return; fi
  apt_install postgresql
  pg_bin_ok || die "postgres-bin: postgresql installed but no /usr/lib/postgresql/*/bin/postgres"
  log "postgres-bin: installed (PrivatePostgres starts its own servers from them)"
}

# clusters prints "version name port status" of the local clusters, newest first.
clusters() { command -v pg_lsclusters >/dev/null && pg_lsclusters -h 2>/dev/null | awk '{print $1, $2, $3, $4}' | sort -rV; }

ensure_postgres() {
  local port=5432 answer
  answer=$(pg_probe 5432)
  if [ "$answer" = ok ]; then
    log "postgres: ready on 127.0.0.1:5432 (already running)"
    echo "export COORD_TEST_POSTGRES_URL='$(pg_url 5432)' COORD_DEMO_POSTGRES_URL='$(pg_url 5432)'"
    return
  fi
  # A cluster of ours configured earlier on another port?
  local ver name status
  while read -r ver name port status; do
    if [ -n "$port" ] && [ "$port" != 5432 ] && pg_ok "$port"; then
      log "postgres: ready on 127.0.0.1:$port (cluster $ver/$name; 5432: $answer)"
      echo "export COORD_TEST_POSTGRES_URL='$(pg_url "$port")' COORD_DEMO_POSTGRES_URL='$(pg_url "$port")'"
      return
    fi
  done < <(clusters || true)

  ensure_postgres_bin
  need_root "creating, configuring or starting a PostgreSQL cluster (5432: $answer)" "$0 postgres"
  if [ -z "$(clusters)" ]; then
    ver=$(ls /usr/lib/postgresql | sort -V | tail -1)
    log "postgres: creating cluster $ver/main"
    as_root pg_createcluster "$ver" main >&2
  fi
  read -r ver name port status < <(clusters | head -1)
  # pg_createcluster takes the next free port when 5432 is taken: use the one it chose.
  if [ "$status" != online ] && tcp_open "$port"; then
    local moved; moved=$(next_free_port $((port + 1)))
    log "postgres: port $port is taken by another server ($(pg_probe "$port")); moving cluster $ver/$name to $moved"
    as_root pg_conftool "$ver" "$name" set port "$moved" >&2
    port=$moved
  fi
  # Tests connect as postgres over loopback without a password: trust loopback only,
  # ahead of every other rule. Read as root, so the check holds when we cannot read it.
  local hba=/etc/postgresql/$ver/$name/pg_hba.conf changed=
  if ! as_root grep -qxF 'host all all 127.0.0.1/32 trust' "$hba"; then
    log "postgres: trusting loopback connections in $hba"
    as_root sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
    changed=1
  fi
  if [ "$status" = online ]; then
    [ -z "$changed" ] || as_root pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" reload >&2
  else
    log "postgres: starting cluster $ver/$name on port $port"
    as_root pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" start >&2
  fi
  wait_until "postgres on port $port" pg_ok "$port"
  log "postgres: ready on 127.0.0.1:$port (cluster $ver/$name)"
  echo "export COORD_TEST_POSTGRES_URL='$(pg_url "$port")' COORD_DEMO_POSTGRES_URL='$(pg_url "$port")'"
}

# ---- Redis --------------------------------------------------------------------

# redis_ok PORT: PING over the Redis protocol, expecting +PONG.
redis_ok() {
  local line
  line=$( { exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 0
            printf 'PING\r\n' >&3
            IFS= read -r -t 3 line <&3 && printf '%s' "$line"; } 2>/dev/null)
  [ "${line%$'\r'}" = +PONG ]
}

redis_bin() { command -v redis-server 2>/dev/null || { [ -x /usr/bin/redis-server ] && echo /usr/bin/redis-server; }; }

ensure_redis_bin() {
  [ -z "${redis_bin_done:-}" ] || return 0
  redis_bin_done=1
  if [ -n "$(redis_bin)" ]; then log "redis-bin: $(redis_bin)"; return; fi
  apt_install redis-server
  [ -n "$(redis_bin)" ] || die "redis-bin: redis-server installed but not found"
  log "redis-bin: installed (PrivateRedis starts its own servers from it)"
}

ensure_redis() {
  if redis_ok 6379; then
    log "redis: ready on 127.0.0.1:6379 (already running)"
    echo "export COORD_TEST_REDIS_URL='redis://127.0.0.1:6379/0'"
    return
  fi
  local how port found
  found=$(free_or_ours 6379 redis_ok)
  read -r how port <<<"$found"
  if [ "$how" = free ]; then
    ensure_redis_bin
    local dir; dir=$(state_dir)/redis-$port
    mkdir -p "$dir"
    [ "$port" = 6379 ] || log "redis: 6379 answers but not as a Redis that lets us in; starting one on $port"
    "$(redis_bin)" --daemonize yes --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
      --dir "$dir" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" >&2
    wait_until "redis on port $port (log: $dir/redis.log)" redis_ok "$port"
    log "redis: started on 127.0.0.1:$port (log: $dir/redis.log)"
  else
    log "redis: ready on 127.0.0.1:$port (started earlier by this script)"
  fi
  echo "export COORD_TEST_REDIS_URL='redis://127.0.0.1:$port/0'"
}

# ---- NATS ---------------------------------------------------------------------

# nats_probe PORT: a JetStream API request ($JS.API.INFO) over the NATS text
# protocol. Prints "jetstream", "off" (NATS without JetStream), or "none".
nats_probe() (
  { exec 3<>"/dev/tcp/127.0.0.1/$1" || { echo none; exit 0; }
    local line
    IFS= read -r -t 3 line <&3 || { echo none; exit 0; }
    case $line in INFO\ *) ;; *) echo none; exit 0 ;; esac
    # no_responders: a request nobody serves is answered at once (HMSG, status 503).
    printf 'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\n' >&3
    printf 'SUB _INBOX.coordkit.services 1\r\nPUB $JS.API.INFO _INBOX.coordkit.services 0\r\n\r\n' >&3
    while IFS= read -r -t 3 line <&3; do
      case $line in
        MSG\ *)
          IFS= read -r -t 3 line <&3 || break
          if [[ $line == *account_info_response* && $line != *'"error"'* ]]; then echo jetstream; else echo off; fi
          exit 0 ;;
        HMSG\ *|-ERR*) echo off; exit 0 ;;
        PING*) printf 'PONG\r\n' >&3 ;;
      esac
    done
    echo off; } 2>/dev/null
)

nats_js_ok() { [ "$(nats_probe "$1")" = jetstream ]; }

ensure_nats_bin() {
  [ -n "$(nats_bin)" ] || apt_install nats-server
  [ -n "$(nats_bin)" ] || die "nats-bin: nats-server installed but not found"
  log "nats-bin: $(nats_bin)"
}

nats_bin() { command -v nats-server 2>/dev/null || { [ -x /usr/sbin/nats-server ] && echo /usr/sbin/nats-server; }; }

ensure_nats() {
  local answer; answer=$(nats_probe 4222)
  if [ "$answer" = jetstream ]; then
    log "nats: JetStream ready on 127.0.0.1:4222 (already running)"
    echo "export COORD_TEST_NATS_URL='nats://127.0.0.1:4222'"
    return
  fi
  local how port found
  found=$(free_or_ours 4222 nats_js_ok)
  read -r how port <<<"$found"
  if [ "$how" = free ]; then
    [ -n "$(nats_bin)" ] || apt_install nats-server
    local dir; dir=$(state_dir)/nats-$port
    mkdir -p "$dir"
    [ "$answer" != off ] || log "nats: the server on 4222 has JetStream off; starting one with JetStream on $port"
    # setsid + no inherited descriptors: the server outlives this script and never
    # holds the stdout a caller reads with $(...).
    setsid "$(nats_bin)" -a 127.0.0.1 -p "$port" -js -sd "$dir" -P "$dir/nats.pid" -l "$dir/nats.log" \
      </dev/null >/dev/null 2>&1 &
    wait_until "nats with JetStream on port $port (log: $dir/nats.log)" nats_js_ok "$port"
    log "nats: started with JetStream on 127.0.0.1:$port (log: $dir/nats.log)"
  else
    log "nats: JetStream ready on 127.0.0.1:$port (started earlier by this script; 4222: $answer)"
  fi
  echo "export COORD_TEST_NATS_URL='nats://127.0.0.1:$port'"
}

# ---- chromium -----------------------------------------------------------------

# The flags headless chromium needs on this kind of machine (as root: no sandbox;
# a closed network: no background connections).
chromium_flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
  --disable-background-networking --disable-component-update --disable-sync)

chromium_ok() {
  local profile out
  profile=$(mktemp -d)
  out=$(timeout 60 /usr/bin/chromium "${chromium_flags[@]}" --user-data-dir="$profile" \
    --dump-dom 'data:text/html,<p id=x>coordkit</p>' 2>/dev/null || true)
  rm -rf "$profile"
  [[ $out == *'<p id="x">coordkit</p>'* ]]
}

ensure_chromium() {
  if [ -x /usr/bin/chromium ] && chromium_ok; then log "chromium: renders headless"
  else
    apt_install chromium
    chromium_ok || die "chromium: installed but cannot render a page headless"
    log "chromium: installed, renders headless"
  fi
  echo "export COORD_TEST_CHROMIUM=/usr/bin/chromium"
}

# ---- main ---------------------------------------------------------------------

if [ "${1:-}" = --packages ]; then
  shift
  [ $# -gt 0 ] || set -- "${all_caps[@]}"
  for c in "$@"; do packages_of "$c"; done | tr ' ' '\n' | sort -u
  exit 0
fi
# present CAP: the capability is there, without installing or starting anything.
present() {
  case $1 in
    cc) cc_ok ;;
    postgres) pg_ok 5432 || { while read -r _ _ port _; do pg_ok "$port" && exit 0; done < <(clusters || true); exit 1; } ;;
    postgres-bin) pg_bin_ok ;;
    redis) redis_ok 6379 ;;
    redis-bin) [ -n "$(redis_bin)" ] ;;
    nats) nats_js_ok 4222 ;;
    nats-bin) [ -n "$(nats_bin)" ] ;;
    chromium) [ -x /usr/bin/chromium ] && chromium_ok ;;
  esac
}
if [ "${1:-}" = --wait-apt-lock ]; then
  wait_apt_lock
  exit 0
fi
if [ "${1:-}" = --check ]; then
  shift
  for c in "$@"; do packages_of "$c" >/dev/null; (present "$c") || exit 1; done
  exit 0
fi
[ $# -gt 0 ] || set -- "${all_caps[@]}"
for c in "$@"; do packages_of "$c" >/dev/null; done
# Install every missing package in one apt-get run (much faster than one per server).
need=()
for c in "$@"; do
  case $c in
    cc) cc_ok || need+=(gcc libc6-dev) ;;
    postgres) pg_ok 5432 || pg_bin_ok || need+=(postgresql) ;;
    postgres-bin) pg_bin_ok || need+=(postgresql) ;;
    redis) redis_ok 6379 || [ -n "$(redis_bin)" ] || need+=(redis-server) ;;
    redis-bin) [ -n "$(redis_bin)" ] || need+=(redis-server) ;;
    nats) nats_js_ok 4222 || [ -n "$(nats_bin)" ] || need+=(nats-server) ;;
    nats-bin) [ -n "$(nats_bin)" ] || need+=(nats-server) ;;
    chromium) [ -x /usr/bin/chromium ] || need+=(chromium) ;;
  esac
done
[ ${#need[@]} -eq 0 ] || apt_install $(printf '%s\n' "${need[@]}" | sort -u)
for c in "$@"; do "ensure_${c//-/_}"; done
