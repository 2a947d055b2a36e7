# What lan.sh and badlink.sh share: sourced by both, after each sets `name` (for its messages) and
# `watchdog` (the argv[0] its watchdog runs under, the only name stop_pid signals outside a namespace).

log() { echo "$name: $*" >&2; }
die() { log "$*"; exit 1; }

# Runs the rest of the line with every descriptor above 2 closed, so that no daemon keeps a pipe or
# socket of whoever ran this script (a test runner waiting for EOF would wait forever).
closefds='for fd in /proc/$$/fd/*; do fd=${fd##*/}; if [ "$fd" -gt 2 ] && [ -e "/proc/$$/fd/$fd" ]; then eval "exec $fd>&-"; fi; done; exec "$@"'

# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.05
  done
}

# The nsfs inode of a named network namespace, as /proc/PID/ns/net shows it.
netns_id() { [ -e "/run/netns/$1" ] && echo "net:[$(stat -L -c %i "/run/netns/$1")]"; }

# True when PID is alive and in network namespace NS: never signal a PID that got reused.
pid_in_netns() {
  local pid=$1 ns=$2 want
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  want=$(netns_id "$ns") || return 1
  [ "$(readlink "/proc/$pid/ns/net" 2>/dev/null)" = "$want" ]
}

alive() { [ -e "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }

# Stops the PID recorded in FILE — TERM, then KILL after 5 s — only if it is still ours: in network
# namespace NS, or (NS "-") our watchdog.
stop_pid() {
  local file=$1 ns=$2 pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  rm -f "$file"
  [[ $pid =~ ^[0-9]+$ ]] && [ "$pid" != $$ ] || return 0
  if [ "$ns" = - ]; then
    grep -qa "$watchdog" "/proc/$pid/cmdline" 2>/dev/null || return 0
  else
    pid_in_netns "$pid" "$ns" || return 0
  fi
  kill -TERM "$pid" 2>/dev/null || return 0
  wait_for 5 eval "! alive $pid" && return 0
  kill -KILL "$pid" 2>/dev/null || true
  wait_for 2 eval "! alive $pid" || log "warning: process $pid survived SIGKILL"
}

# Stops anything a test left running inside network namespace NS (ours, by namespace), one PID at
# a time through FILE.
stop_strays() {
  local ns=$1 file=$2 pid
  [ -e "/run/netns/$ns" ] || return 0
  for pid in $(ip netns pids "$ns" 2>/dev/null); do
    echo "$pid" > "$file"
    stop_pid "$file" "$ns"
  done
}

# Deletes the namespaces this script recorded (by exact name) and its state directory.
delete_namespaces() {
  local ns
  if [ -f "$state/namespaces" ]; then
    while read -r ns; do
      [ -n "$ns" ] && [ -e "/run/netns/$ns" ] && { ip netns del "$ns" || log "warning: could not delete namespace $ns"; }
    done < "$state/namespaces"
  fi
  rm -rf "$state"
}
