#!/usr/bin/env bash
# Ensure the servers the tests and the demo talk to are installed, started on
# loopback and ready: PostgreSQL (127.0.0.1:5432, trust auth for loopback),
# Redis (127.0.0.1:6379, no persistence) and NATS with JetStream (127.0.0.1:4222).
# Idempotent: a server that already answers is left alone. Needs root (or sudo)
# only to install or start what is missing.
set -euo pipefail

log() { printf 'services: %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_updated=
apt_install() {
  if [ -z "$apt_updated" ]; then
    log "apt-get update"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    apt_updated=1
  fi
  log "apt-get install $*"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

tcp_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() { # name, command...
  local name=$1; shift
  for _ in $(seq 1 120); do
    if "$@" >/dev/null 2>&1; then log "$name ready"; return 0; fi
    sleep 0.5
  done
  log "$name did not become ready within 60s"; return 1
}

pg_ok() { psql "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable&connect_timeout=2" -Atqc 'select 1' ; }

ensure_postgres() {
  if pg_ok >/dev/null 2>&1; then log "postgres already running"; return; fi
  if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then apt_install postgresql postgresql-client; fi
  local ver; ver=$(ls /usr/lib/postgresql | sort -V | tail -1)
  if ! pg_lsclusters -h 2>/dev/null | grep -q .; then as_root pg_createcluster "$ver" main >&2; fi
  local cluster; cluster=$(pg_lsclusters -h | head -1 | awk '{print $1" "$2}')
  # Tests connect as postgres over loopback without a password: trust loopback only.
  local hba="/etc/postgresql/${cluster// //}/pg_hba.conf"
  if [ -f "$hba" ] && ! grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
    log "trusting loopback connections in $hba"
    as_root sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
  fi
  # shellcheck disable=SC2086
  as_root pg_ctlcluster --skip-systemctl-redirect $cluster start >&2 || as_root pg_ctlcluster --skip-systemctl-redirect $cluster reload >&2 || true
  wait_for postgres pg_ok
}

ensure_redis() {
  if redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; then log "redis already running"; return; fi
  command -v redis-server >/dev/null || apt_install redis-server
  as_root mkdir -p /var/lib/redis /var/log/redis
  as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log >&2
  wait_for redis sh -c 'redis-cli -h 127.0.0.1 -p 6379 ping | grep -q PONG'
}

ensure_nats() {
  if tcp_open 4222; then log "nats already running"; return; fi
  command -v nats-server >/dev/null || [ -x /usr/sbin/nats-server ] || apt_install nats-server
  local bin; bin=$(command -v nats-server || echo /usr/sbin/nats-server)
  as_root mkdir -p /var/lib/nats-server
  as_root start-stop-daemon --start --oknodo --background --exec "$bin" -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log >&2
  wait_for nats tcp_open 4222
}

command -v psql >/dev/null || apt_install postgresql-client
ensure_postgres
ensure_redis
ensure_nats
