#!/usr/bin/env bash
# Scripted checks of scripts/services.sh, one per situation it must handle. Each
# check changes the machine (starts servers, creates clusters and users), so they
# run only where scripts/fresh-machine.sh puts them: in its throwaway Debian root,
# after the README commands installed the packages, each check in fresh network,
# PID and mount namespaces of its own (nothing from one check is running in the
# next; PostgreSQL's directories are replaced by empty ones where a check needs a
# machine without clusters).
#
#   scripts/services_test.sh list         # the checks
#   scripts/services_test.sh run NAME     # one check; exit 0 if it holds
set -euo pipefail
cd "$(dirname "$0")/.."
services=$PWD/scripts/services.sh

checks=(redis-answers-without-cli nats-jetstream-off pg-port-taken pg-password-cluster
  pg-nonroot-sudo nonroot-without-sudo second-run-changes-nothing apt-lock-held)

fail() { echo "services_test: $CHECK: FAIL: $*" >&2; exit 1; }
note() { echo "services_test: $CHECK: $*" >&2; }

# count NAME: processes whose command name is NAME.
count() { local n=0 c; for c in /proc/[0-9]*/comm; do [ "$(cat "$c" 2>/dev/null)" = "$1" ] && n=$((n + 1)); done; echo $n; }

wait_port() { for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.1; done; fail "nothing listens on $1"; }

# no_clusters: PostgreSQL's directories, empty (this mount namespace only).
no_clusters() {
  local d
  for d in /etc/postgresql /var/lib/postgresql /var/log/postgresql /run/postgresql; do
    mkdir -p "$d" && mount -t tmpfs -o mode=0755 tmpfs "$d" && chown postgres:postgres "$d"
  done
  chmod 2775 /run/postgresql
}

# url_of VAR OUTPUT: the value services.sh exported for VAR.
url_of() { sed -n "s/.*$1='\\([^']*\\)'.*/\\1/p" <<<"$2"; }

# jetstream_stream PORT: creates a stream through the JetStream API (not the
# request services.sh makes), proving JetStream accepts writes there.
jetstream_stream() {
  local line
  exec 3<>"/dev/tcp/127.0.0.1/$1"
  IFS= read -r -t 5 line <&3
  local cfg='{"name":"SERVICESCHECK","subjects":["servicescheck.>"],"storage":"memory"}'
  printf 'CONNECT {"verbose":false}\r\nSUB _INBOX.check 1\r\nPUB $JS.API.STREAM.CREATE.SERVICESCHECK _INBOX.check %d\r\n%s\r\n' "${#cfg}" "$cfg" >&3
  while IFS= read -r -t 5 line <&3; do
    case $line in MSG\ *) IFS= read -r -t 5 line <&3; exec 3>&-
      [[ $line == *stream_create_response* && $line != *'"error"'* ]]; return ;; esac
  done
  exec 3>&-
  return 1
}

check_redis-answers-without-cli() {
  # A Redis answers on 6379; redis-cli is broken (a fresh machine has none). The
  # old check used redis-cli and started a second redis-server.
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no --dir /tmp >/dev/null
  wait_port 6379
  printf '#!/bin/sh\necho "redis-cli is not installed" >&2\nexit 127\n' >/tmp/redis-cli && chmod +x /tmp/redis-cli
  [ ! -e /usr/bin/redis-cli ] || mount --bind /tmp/redis-cli /usr/bin/redis-cli
  local out; out=$("$services" redis) || fail "services.sh redis exited non-zero"
  [ "$(url_of COORD_TEST_REDIS_URL "$out")" = redis://127.0.0.1:6379/0 ] || fail "exported $out, want the Redis on 6379"
  [ "$(count redis-server)" = 1 ] || fail "$(count redis-server) redis-server processes: it started another"
}

check_nats-jetstream-off() {
  # The packaged nats-server as its service starts it: JetStream off, on 4222.
  # The old check saw the port (and start-stop-daemon --oknodo saw the process)
  # and reported NATS ready.
  start-stop-daemon --start --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222
  wait_port 4222
  local out; out=$("$services" nats) || fail "services.sh nats exited non-zero"
  local url; url=$(url_of COORD_TEST_NATS_URL "$out")
  [ -n "$url" ] && [ "$url" != nats://127.0.0.1:4222 ] || fail "exported '$url', want a JetStream server on another port"
  jetstream_stream "${url##*:}" || fail "no JetStream stream could be created at $url"
  jetstream_stream 4222 && fail "the check server on 4222 has JetStream after all: the check proves nothing"
  local again; again=$("$services" nats) || fail "second run exited non-zero"
  [ "$again" = "$out" ] || fail "second run exported '$again', first '$out'"
  [ "$(count nats-server)" = 2 ] || fail "$(count nats-server) nats-server processes after two runs, want 2"
  note "JetStream-off server on 4222 left alone; JetStream at $url, found again by a second run"
}

check_pg-port-taken() {
  # No cluster yet, and 5432 is taken by something that is not PostgreSQL:
  # pg_createcluster picks 5433. The old script then waited 60 s on 5432.
  no_clusters
  redis-server --daemonize yes --bind 127.0.0.1 --port 5432 --save "" --appendonly no --dir /tmp >/dev/null
  wait_port 5432
  local out; out=$("$services" postgres) || fail "services.sh postgres exited non-zero"
  local url; url=$(url_of COORD_TEST_POSTGRES_URL "$out")
  [[ $url == *:5433/* ]] || fail "exported '$url', want port 5433 (pg_lsclusters: $(pg_lsclusters -h))"
  [ "$(url_of COORD_DEMO_POSTGRES_URL "$out")" = "$url" ] || fail "the demo is told another URL: $out"
  psql "$url" -Atc 'select 1' | grep -qx 1 || fail "psql could not query $url"
  local again; again=$("$services" postgres) || fail "second run exited non-zero"
  [ "$again" = "$out" ] || fail "second run exported '$again'"
  [ "$(pg_lsclusters -h | wc -l)" = 1 ] || fail "clusters after two runs: $(pg_lsclusters -h)"
}

check_pg-password-cluster() {
  # Debian's own cluster, as the package creates it: loopback needs a password.
  no_clusters
  pg_createcluster 15 main --start >/dev/null
  local url=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
  PGCONNECT_TIMEOUT=3 psql "$url" -Atc 'select 1' </dev/null >/dev/null 2>&1 && fail "the new cluster trusts loopback already: the check proves nothing"
  local out; out=$("$services" postgres) || fail "services.sh postgres exited non-zero"
  [ "$(url_of COORD_TEST_POSTGRES_URL "$out")" = "$url" ] || fail "exported $out"
  psql "$url" -Atc 'select 1' | grep -qx 1 || fail "psql could not query $url"
}

check_pg-nonroot-sudo() {
  chmod o+x /root # the users below run /root/coordkit/scripts/services.sh
  # A developer with sudo, who cannot read pg_hba.conf: the trust lines go in
  # once. The old check grepped the unreadable file and inserted them every run.
  # The second run starts a stopped cluster (a reboot), so it does check the file.
  no_clusters
  id dev >/dev/null 2>&1 || useradd -m dev
  echo 'dev ALL=(ALL) NOPASSWD:ALL' >/etc/sudoers.d/dev
  local hba=/etc/postgresql/15/main/pg_hba.conf
  su dev -c "$services postgres" >/dev/null || fail "first run as dev exited non-zero"
  su dev -c "test -r $hba" && fail "dev can read $hba: the check proves nothing"
  pg_ctlcluster 15 main stop
  su dev -c "$services postgres" >/dev/null || fail "second run as dev exited non-zero"
  local n; n=$(grep -c '^host all all 127.0.0.1/32 trust$' "$hba")
  [ "$n" = 1 ] || fail "$n trust lines for 127.0.0.1 in $hba after two runs, want 1"
  psql postgres://postgres@127.0.0.1:5432/postgres -Atc 'select 1' | grep -qx 1 || fail "psql could not query"
}

check_nonroot-without-sudo() {
  # No sudo at all: what needs root is named, with the command to run; what does
  # not (Redis, NATS started as the user) still works.
  no_clusters
  chmod o+x /root
  id plain >/dev/null 2>&1 || useradd -m plain
  [ ! -e /usr/bin/sudo ] || mount --bind /dev/null /usr/bin/sudo # not executable: no sudo
  local out rc=0
  out=$(su plain -c "$services postgres" 2>&1) || rc=$?
  [ "$rc" != 0 ] || fail "services.sh postgres succeeded without root: $out"
  [[ $out == *"needs root, and there is no sudo here; run as root:"* && $out == *"services.sh postgres"* ]] || fail "no clear instruction: $out"
  note "said: $(tr '\n' ' ' <<<"$out")"
  out=$(su plain -c "$services redis nats") || fail "redis and nats as a plain user failed"
  [[ $out == *COORD_TEST_REDIS_URL* && $out == *COORD_TEST_NATS_URL* ]] || fail "exported: $out"
}

check_second-run-changes-nothing() {
  # Everything from nothing running, then again: the second run starts nothing.
  # (PostgreSQL by its postmaster's pid: backends come and go with connections.)
  local first second procs
  servers() { echo "postmaster $(head -1 /var/lib/postgresql/15/main/postmaster.pid 2>/dev/null), redis-server $(count redis-server), nats-server $(count nats-server)"; }
  first=$("$services" postgres redis nats) || fail "first run exited non-zero"
  procs=$(servers)
  second=$("$services" postgres redis nats) || fail "second run exited non-zero"
  [ "$second" = "$first" ] || fail "second run exported '$second', first '$first'"
  [ "$(servers)" = "$procs" ] || fail "before the second run: $procs; after: $(servers)"
  note "$procs, unchanged by the second run"
}

# dpkg_locked: waits until a process holds dpkg's frontend lock.
dpkg_locked() {
  local ino; ino=$(stat -c %i /var/lib/dpkg/lock-frontend)
  for _ in $(seq 1 50); do grep -q "POSIX .*:$ino " /proc/locks && return; sleep 0.1; done
  fail "dpkg --set-selections did not take the lock"
}

check_apt-lock-held() {
  # Another package manager holds the dpkg lock (a fresh cloud machine's boot-time
  # upgrade): services.sh waits for it, saying who holds it, and gives up after its
  # bound naming the holder. (It used to fail at once: "Could not get lock".) dpkg
  # --set-selections holds the lock while it reads its input.
  local out start
  (sleep 3) | dpkg --set-selections &
  dpkg_locked
  start=$SECONDS
  out=$(COORD_APT_LOCK_WAIT=60 "$services" --wait-apt-lock 2>&1) || fail "--wait-apt-lock exited non-zero: $out"
  [[ $out == *"held by process"*dpkg* ]] || fail "it did not say who holds the lock: $out"
  [ $((SECONDS - start)) -ge 2 ] || fail "it returned after $((SECONDS - start))s while the lock was held for 3s: $out"
  wait
  (sleep 8) | dpkg --set-selections &
  dpkg_locked
  out=$(COORD_APT_LOCK_WAIT=2 "$services" --wait-apt-lock 2>&1) && fail "it waited past its 2s bound and succeeded: $out"
  [[ $out == *"still held by process"*"COORD_APT_LOCK_WAIT"* ]] || fail "the give-up message does not name the holder and the setting: $out"
  wait
  note "waited for the holder, gave up after its bound"
}

case ${1:-} in
  list) printf '%s\n' "${checks[@]}" ;;
  run)
    CHECK=${2:?which check}
    [ "$(id -u)" = 0 ] && [ -f /etc/coordkit-fresh-machine ] ||
      { echo "services_test: runs only inside scripts/fresh-machine.sh's root" >&2; exit 2; }
    declare -F "check_$CHECK" >/dev/null || { echo "services_test: no check $CHECK" >&2; exit 2; }
    "check_$CHECK"
    echo "services_test: $CHECK: ok" >&2 ;;
  *) echo "usage: $0 list | run NAME" >&2; exit 2 ;;
esac
