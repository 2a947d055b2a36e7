#!/usr/bin/env bash
# A LAN of test hosts on this machine, for tests that cross a network with mDNS.
#
#   lan.sh up N             switch namespace pc-lan-switch holding bridge pcbr0 (no address), and
#                           hosts pc-host1..N: network namespaces on the bridge through veth pairs
#                           (eth0 = 10.77.0.(10+i)/24), each with its own dbus-daemon and
#                           avahi-daemon (host-name=pc-hostI) in a private mount namespace
#   lan.sh exec HOST CMD..  runs CMD inside HOST's network and mount namespaces, so avahi clients
#                           in CMD talk to HOST's avahi-daemon (CMD replaces this script: same PID)
#   lan.sh kill-avahi HOST  stops HOST's avahi-daemon;  lan.sh start-avahi HOST  starts it again
#   lan.sh address HOST     prints HOST's address
#   lan.sh status           lists what is up
#   lan.sh down             kills exactly the processes it started (by recorded PID, checked to be
#                           in our namespaces), deletes its namespaces by exact name; idempotent
#
# mDNS never touches the root network namespace: the bridge and every daemon live in namespaces of
# their own, and nothing is started unless its namespaces check out. Everything is bounded: each
# wait has a timeout, and a watchdog takes the whole LAN down after PC_LAN_LIFETIME seconds.
#
# Environment: PC_LAN_STATE   state directory (PIDs, configs, logs), default /tmp/pc-lan
#              PC_LAN_PREFIX  namespace name prefix, default "pc" (pc-lan-switch, pc-host1…);
#                             another prefix lets two LANs exist side by side
#              PC_LAN_LIFETIME  seconds before the watchdog runs `down`, default 3600
set -euo pipefail

state=${PC_LAN_STATE:-/tmp/pc-lan}
prefix=${PC_LAN_PREFIX:-pc}
lifetime=${PC_LAN_LIFETIME:-3600}
switch=$prefix-lan-switch
bridge=pcbr0
subnet=10.77.0
self=$(readlink -f "$0")

name=lan.sh watchdog=pc-lan-watchdog
source "$(dirname "$self")/common.sh"

host_index() {
  [[ $1 =~ ^$prefix-host([0-9]+)$ ]] || die "no such host \"$1\" (hosts are $prefix-host1, $prefix-host2, …)"
  echo "${BASH_REMATCH[1]}"
}

# The host's holder process: in the host's network namespace and in a mount namespace of its own.
holder() {
  local h=$1 pid
  pid=$(cat "$state/$h/holder.pid" 2>/dev/null) || die "$h is not up (no $state/$h/holder.pid; run lan.sh up)"
  pid_in_netns "$pid" "$h" || die "$h: holder $pid is gone or not in namespace $h"
  [ "$(readlink "/proc/$pid/ns/mnt")" != "$(readlink /proc/$$/ns/mnt)" ] || die "$h: holder $pid shares our mount namespace"
  echo "$pid"
}

in_host() {
  local h=$1 pid; shift
  pid=$(holder "$h")
  nsenter --target "$pid" --mount --net="/run/netns/$h" -- "$@"
}

start_avahi() {
  local h=$1 pid
  ! pid_in_netns "$(cat "$state/$h/avahi.pid" 2>/dev/null || echo none)" "$h" || die "$h: avahi-daemon is already running"
  pid=$(holder "$h")
  in_host "$h" rm -f /run/avahi-daemon/pid
  # In the foreground (so that its log goes to avahi.log), in the background of nothing: the
  # simple command after & is exec'd, closefds then nsenter then avahi-daemon, one process.
  bash -c "$closefds" closefds nsenter --target "$pid" --mount --net="/run/netns/$h" -- \
    avahi-daemon --no-drop-root --no-chroot --no-rlimits --file "$state/$h/avahi-daemon.conf" \
    </dev/null >>"$state/$h/avahi.log" 2>&1 &
  echo $! > "$state/$h/avahi.pid"
  local deadline=$((SECONDS + 10))
  until in_host "$h" test -s /run/avahi-daemon/pid; do
    alive "$(cat "$state/$h/avahi.pid")" || die "$h: avahi-daemon exited: $(tail -n 3 "$state/$h/avahi.log" | tr '\n' ' ')"
    [ $SECONDS -lt $deadline ] || die "$h: avahi-daemon wrote no PID file within 10 s (see $state/$h/avahi.log)"
    sleep 0.05
  done
  [ "$(in_host "$h" cat /run/avahi-daemon/pid)" = "$(cat "$state/$h/avahi.pid")" ] || die "$h: avahi-daemon's PID is not the one started"
  wait_for 10 in_host "$h" avahi-daemon --check || die "$h: avahi-daemon is not running (see $state/$h/avahi.log)"
  pid_in_netns "$(cat "$state/$h/avahi.pid")" "$h" || die "$h: avahi-daemon is not in namespace $h"
}

write_avahi_conf() {
  local h=$1
  cat > "$state/$h/avahi-daemon.conf" <<CONF
[server]
host-name=$h
domain-name=local
use-ipv4=yes
use-ipv6=no
allow-interfaces=eth0
enable-dbus=yes

[wide-area]
enable-wide-area=no

[publish]
publish-addresses=yes
publish-aaaa-on-ipv4=no
publish-hinfo=no
publish-workstation=no
publish-domain=no

[reflector]
enable-reflector=no
CONF
}

up_host() {
  local i=$1 h=$prefix-host$1 d=$state/$prefix-host$1 pid
  mkdir -p "$d"
  ip netns add "$h" || die "cannot create network namespace $h"
  echo "$h" >> "$state/namespaces"
  ip -n "$h" link add eth0 type veth peer name "port$i" netns "$switch"
  ip -n "$switch" link set "port$i" master "$bridge" up
  ip -n "$h" link set lo up
  ip -n "$h" addr add "$subnet.$((10 + i))/24" dev eth0
  ip -n "$h" link set eth0 up
  ip -n "$h" route add 224.0.0.0/4 dev eth0
  ip netns exec "$h" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 || true
  write_avahi_conf "$h"

  # The holder owns the host's private mount namespace (its own /run/dbus and /run/avahi-daemon)
  # and sits in its network namespace; everything else enters both through it.
  bash -c "$closefds" closefds ip netns exec "$h" unshare --mount --propagation private --fork \
    sh -c "echo \$\$ > '$d/holder.pid.new' && mkdir -p /run/dbus /run/avahi-daemon && mount -t tmpfs -o mode=0755 pc-lan /run/dbus \
           && mount -t tmpfs -o mode=0755 pc-lan /run/avahi-daemon && mv '$d/holder.pid.new' '$d/holder.pid' && exec sleep $lifetime" \
    </dev/null >>"$d/holder.log" 2>&1 &
  echo $! > "$d/unshare.pid"
  wait_for 10 test -s "$d/holder.pid" || die "$h: namespace holder did not start (see $d/holder.log)"
  pid=$(holder "$h")
  in_host "$h" mountpoint -q /run/avahi-daemon || die "$h: no private /run/avahi-daemon"

  in_host "$h" bash -c "$closefds" closefds dbus-daemon --system --fork --print-pid \
    </dev/null > "$d/dbus.pid" 2>>"$d/dbus.log" || die "$h: dbus-daemon did not start (see $d/dbus.log)"
  wait_for 10 in_host "$h" test -S /run/dbus/system_bus_socket || die "$h: dbus-daemon made no socket within 10 s"
  start_avahi "$h"
}

up() {
  local n=${1:-}
  [[ $n =~ ^[1-9][0-9]?$ ]] || die "usage: lan.sh up N (1 to 99 hosts)"
  [[ $lifetime =~ ^[1-9][0-9]*$ ]] || die "PC_LAN_LIFETIME must be a number of seconds, not \"$lifetime\""
  [ "$(id -u)" = 0 ] || die "needs root: network namespaces cannot be created here"
  for tool in ip nsenter unshare dbus-daemon avahi-daemon; do
    command -v "$tool" >/dev/null || die "needs $tool (apt-get install iproute2 util-linux dbus avahi-daemon)"
  done
  down
  local ns
  for ns in "$switch" $(seq -f "$prefix-host%g" "$n"); do
    [ ! -e "/run/netns/$ns" ] || die "network namespace $ns already exists: another LAN is up (lan.sh down with its PC_LAN_STATE), or set PC_LAN_PREFIX"
  done
  mkdir -p "$state"
  bringing_up=1
  local why
  why=$(ip netns add "$switch" 2>&1) || die "cannot create network namespaces here: $why"
  echo "$switch" >> "$state/namespaces"
  ip -n "$switch" link set lo up
  # No address on the bridge, no process in the switch: it only forwards frames between hosts.
  ip -n "$switch" link add "$bridge" type bridge mcast_snooping 0
  ip -n "$switch" link set "$bridge" up
  # The watchdog: whatever happens to whoever ran this, the LAN goes away after $lifetime s.
  bash -c "$closefds" closefds bash -c 'trap "kill \$s 2>/dev/null; exit 0" TERM; sleep "$1" & s=$!; wait $s; exec "$2" down' \
    pc-lan-watchdog "$lifetime" "$self" </dev/null >>"$state/watchdog.log" 2>&1 &
  echo $! > "$state/watchdog.pid"
  for i in $(seq "$n"); do up_host "$i"; done
  bringing_up=0
  echo "lan up: $(seq -s ' ' -f "$prefix-host%g" "$n") on $subnet.0/24 (switch $switch; down within $lifetime s)"
}

down() {
  [ -d "$state" ] || return 0
  stop_pid "$state/watchdog.pid" -
  local d h
  for d in "$state"/*/; do
    h=$(basename "$d")
    [ -f "$d/avahi-daemon.conf" ] || [ -f "$d/holder.pid" ] || continue
    stop_pid "$d/avahi.pid" "$h"
    stop_pid "$d/dbus.pid" "$h"
    stop_pid "$d/holder.pid" "$h"
    stop_pid "$d/unshare.pid" "$h"
    # Anything a test left running inside this host (a publisher, say): ours, by namespace.
    stop_strays "$h" "$d/stray.pid"
  done
  delete_namespaces
}

status() {
  [ -f "$state/namespaces" ] || { echo "no LAN up (state $state)"; return 0; }
  local ns
  while read -r ns; do
    if [ -f "$state/$ns/avahi.pid" ] && alive "$(cat "$state/$ns/avahi.pid")"; then
      echo "$ns $subnet.$((10 + $(host_index "$ns"))) avahi-daemon $(cat "$state/$ns/avahi.pid")"
    elif [ -d "$state/$ns" ]; then
      echo "$ns $subnet.$((10 + $(host_index "$ns"))) avahi-daemon stopped"
    else
      echo "$ns (switch)"
    fi
  done < "$state/namespaces"
}

bringing_up=0
trap 'rc=$?; if [ "$bringing_up" = 1 ]; then log "up failed: taking down what was started"; bringing_up=0; down || true; fi; exit $rc' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

case ${1:-} in
  up) shift; up "$@" ;;
  down) down ;;
  exec)
    shift
    h=${1:?usage: lan.sh exec HOST CMD...}; shift
    [ $# -gt 0 ] || die "usage: lan.sh exec HOST CMD..."
    host_index "$h" >/dev/null
    pid=$(holder "$h")
    trap - EXIT
    exec nsenter --target "$pid" --mount --net="/run/netns/$h" --wd="$PWD" -- "$@"
    ;;
  kill-avahi) h=${2:?usage: lan.sh kill-avahi HOST}; host_index "$h" >/dev/null; stop_pid "$state/$h/avahi.pid" "$h" ;;
  start-avahi) h=${2:?usage: lan.sh start-avahi HOST}; host_index "$h" >/dev/null; start_avahi "$h" ;;
  address) echo "$subnet.$((10 + $(host_index "${2:?usage: lan.sh address HOST}")))" ;;
  status) status ;;
  *) die "usage: lan.sh up N | exec HOST CMD... | kill-avahi HOST | start-avahi HOST | address HOST | status | down" ;;
esac
