# Progress lines for the scripts (sourced): no phase longer than ~20 s goes by
# without a line saying what is running.

progress_t0=$SECONDS

# clock prints the time since the script started, e.g. 3m07s.
clock() { local s=$((SECONDS - progress_t0)); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

# phase announces a phase: what it is and roughly how long it takes.
phase() { printf '== %s  [%s]\n' "$*" "$(clock)"; }

# while_running LABEL DIR CMD...: runs CMD; every 20 s a line says it still runs
# (on stderr) and how large DIR (the cache it fills) has grown; a CMD that ran 5 s
# or more says when it ended (PROGRESS_EVERY, default 20: the interval, and 4
# times that threshold). Returns CMD's status. (A phase of several commands,
# go vet of six modules, printed nothing for 45 s: each command's first line came
# 20 s after it started, and the previous one's last up to 20 s before it ended;
# du of a cold cache under load is bounded to 5 s.)
while_running() {
  local label=$1 dir=$2; shift 2
  local start=$SECONDS
  "$@" &
  local pid=$!
  (while sleep "${PROGRESS_EVERY:-20}"; do
     size=$(timeout 5 du -sm "$dir" 2>/dev/null | cut -f1) || size=
     echo "  … $label: still running [$(clock)]${size:+, $size MB in $dir}" >&2
   done) &
  local beat=$! rc=0
  wait "$pid" || rc=$?
  kill "$beat" 2>/dev/null || true
  wait "$beat" 2>/dev/null || true
  if [ $((SECONDS - start)) -ge $((${PROGRESS_EVERY:-20} / 4)) ]; then echo "  … $label: ended after $((SECONDS - start))s [$(clock)]" >&2; fi
  return "$rc"
}
