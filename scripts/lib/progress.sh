# Progress lines for the scripts (sourced): no phase longer than ~20 s goes by
# without a line saying what is running.

progress_t0=$SECONDS

# clock prints the time since the script started, e.g. 3m07s.
clock() { local s=$((SECONDS - progress_t0)); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

# phase announces a phase: what it is and roughly how long it takes.
phase() { printf '== %s  [%s]\n' "$*" "$(clock)"; }

# while_running LABEL DIR CMD...: runs CMD; every 20 s a line says it still runs
# (on stderr) and how large DIR (the cache it fills) has grown. Returns CMD's
# status.
while_running() {
  local label=$1 dir=$2; shift 2
  "$@" &
  local pid=$!
  (while sleep 20; do
     echo "  … $label: still running [$(clock)], $(du -sm "$dir" 2>/dev/null | cut -f1) MB in $dir" >&2
   done) &
  local beat=$! rc=0
  wait "$pid" || rc=$?
  kill "$beat" 2>/dev/null || true
  wait "$beat" 2>/dev/null || true
  return "$rc"
}
