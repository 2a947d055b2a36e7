# Sourced by the bench scripts (after `cd` to the repository): `bench_workdir NAME` makes the work
# directory, sets $work, and arranges the exit: every child still running stopped (each is a
# `timeout` leading its own process group, GNU time and the program under it or a pipe feeder, which
# passes a TERM on to the group; the group is killed 10 s later), then the directory removed, or
# kept with KEEP_LOGS=1 (its path printed).
bench_workdir() {
  bench_name=$1
  work=$(mktemp -d "/tmp/partycast-$bench_name.XXXXXX")
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
}

bench_cleanup() {
  local pids
  pids=$(jobs -pr)
  if [ -n "$pids" ]; then
    kill $pids 2>/dev/null || true
    for _ in $(seq 50); do [ -n "$(jobs -pr)" ] || break; sleep 0.2; done
    for pid in $(jobs -pr); do kill -KILL -- "-$pid" 2>/dev/null || true; done
  fi
  if [ -n "${KEEP_LOGS:-}" ]; then echo "$bench_name: logs kept in $work" >&2; else rm -rf "$work"; fi
}
